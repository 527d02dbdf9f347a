"""SessionWriter: appends to session memory off the caller's thread, in order per session."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, TypeVar

from agent_runtime.memory._memory import SessionMemory
from agent_runtime.memory._store import check_messages, check_session
from agent_runtime.messages import Message
from supervisors._log import get_logger

log = get_logger(__name__)

WORKERS = 2
"""The number of threads each `SessionWriter` owns, whatever the number of sessions."""

_State = Literal["open", "closing", "closed"]
T = TypeVar("T")


@dataclass(frozen=True)
class _Batch:
    messages: list[Message]
    done: Future[Any]
    work: Callable[[], Any] | None = None  # a submitted call, in place of an append


class SessionWriter:
    """Commits batches of messages to a `SessionMemory` on threads of its own, so that no caller
    (least of all the runtime's shared event loop) waits for the store.

    An SQLite append with `synchronous=FULL` waits for an fsync (4 ms median, 14 ms p99 here);
    done on the event loop it would stall every agent's stream for that long. `append` only
    queues the batch and returns a `concurrent.futures.Future`; a run driver awaits
    `asyncio.wrap_future(future)` before it emits the run's terminal event, so the terminal
    always follows the commit of the run's last turn.

    Guarantees:
    - `append` never blocks: it checks its arguments, queues the batch under a lock of this
      object held only for queue operations, and returns. It may be called from any thread,
      the event-loop thread included.
    - One writer per session: the batches of one session are committed one at a time, each
      as one `memory.append(session, messages)` call (one atomic batch: one turn), strictly
      in the order they were accepted (a batch whose `append` returned before another's was
      called is committed before it). Batches of different sessions are independent: a
      session whose commit is slow or stuck delays only its own later batches (while a
      thread is free; see Threading).
    - A batch's future gets `None` once the store committed it, or the exception the store
      raised (also logged as `memory.append.failed` with `session` and `count`). A failed
      batch does not stop the session: its later batches are still committed, each with its
      own outcome. Stopping would turn one transient error (a busy database, a full disk
      that is cleared) into the loss of every later turn of the session, while the caller,
      who sees the failure on that batch's future, is the one who can decide what it means.
    - Futures are never cancelled: an accepted batch is always committed, so `cancel()`
      returns False (the future reports `running()` from acceptance on). Cancelling a task
      that awaits `asyncio.wrap_future(future)` thus stops the wait, never the write.
    - Futures are completed on a writer thread, so their done-callbacks run there, outside
      every lock of this module; they must be short (`asyncio.wrap_future`'s are).
    - An empty batch gets a completed future at once and never reaches the store.

    Threading: the writer owns `WORKERS` (2) daemon threads, started by the constructor and
    children of no supervisor, however many sessions there are (there may be thousands). A
    session with queued batches waits in one FIFO of ready sessions; a free thread takes the
    first, commits that session's oldest batch, and puts the session back at the end of the
    FIFO if it has more, so sessions take turns and one busy session cannot starve the rest.
    A session that is being committed is not in the FIFO, which is what keeps its batches in
    order and one at a time. Two threads let other sessions commit while one session's
    commit is slow (a Postgres row lock, say); more would buy little with `SqliteStore`,
    whose single connection serialises every commit anyway. An idle session costs nothing.
    Independence ends where the store serialises (`SqliteStore`'s one connection); a commit
    that hangs in `SessionMemory` holds up no other session (each has its own lock there).

    `close()` stops accepting batches (a later `append` raises `RuntimeError`), waits until
    every accepted batch is committed or failed (nothing accepted is dropped), then joins the
    threads. If that takes longer than its timeout it returns False and the threads go on
    draining in the background; calling `close()` again waits again. The writer never closes
    `memory`: close the writer first. Batches still queued when the process exits without
    `close()` are lost (the threads are daemons so that a forgotten writer cannot hang exit).
    """

    def __init__(self, memory: SessionMemory, *, name: str = "session-writer") -> None:
        if not isinstance(memory, SessionMemory):
            raise TypeError(f"invalid memory {memory!r} (expected a SessionMemory)")
        if not isinstance(name, str):
            raise TypeError(f"invalid name {name!r} (expected a non-empty str)")
        if not name:
            raise ValueError("invalid name '' (expected a non-empty str)")
        self.memory = memory
        self.name = name
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._state: _State = "open"
        self._queues: dict[str, deque[_Batch]] = {}  # batches not yet taken, per session
        self._ready: deque[str] = deque()  # sessions with queued batches, none in progress
        self._busy: set[str] = set()  # sessions with a batch in progress
        self._unfinished: dict[Future[None], None] = {}  # accepted, not done (ordered set)
        self._last: dict[str, Future[None]] = {}  # per session: its newest batch not yet done
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(WORKERS)
        ]
        for thread in self._threads:
            thread.start()

    def append(self, session: str, messages: Sequence[Message]) -> Future[Any]:
        """Queue `messages` to be appended to `session` as one batch; return at once with a
        future that gets `None` once the store committed the batch, or the store's exception.

        The batch is copied: changing `messages` afterwards changes nothing.

        Raises:
            TypeError, ValueError: `session` is not a non-empty str, or `messages` is not a
                list of `Message` (nothing is queued).
            RuntimeError: the writer is closed (or closing).
        """
        check_session(session)
        batch = _Batch(check_messages(messages), Future())
        batch.done.set_running_or_notify_cancel()  # from now on, cancel() returns False
        with self._lock:
            if self._state != "open":
                raise RuntimeError(f"session writer {self.name!r} is closed")
            if batch.messages:
                self._queue_locked(session, batch)
        if not batch.messages:
            batch.done.set_result(None)
        return batch.done

    def submit(self, session: str, fn: Callable[[], T]) -> Future[T]:
        """Queue `fn()` on the writer's threads in `session`'s order: it runs after every
        batch of `session` accepted before (so it reads what they wrote) and before every one
        accepted after; returns at once with a future of its result or exception.

        For the session's other storage work that must keep that order (an agent's pending
        prompt written before its turn, cleared after it; a history read after the agent's
        own writes) and that must stay off the event loop.

        Raises:
            TypeError, ValueError: `session` is not a non-empty str.
            RuntimeError: the writer is closed (or closing).
        """
        check_session(session)
        batch = _Batch([], Future(), fn)
        batch.done.set_running_or_notify_cancel()
        with self._lock:
            if self._state != "open":
                raise RuntimeError(f"session writer {self.name!r} is closed")
            self._queue_locked(session, batch)
        return batch.done

    def _queue_locked(self, session: str, batch: _Batch) -> None:
        self._unfinished[batch.done] = None
        self._last[session] = batch.done
        queue = self._queues.setdefault(session, deque())
        queue.append(batch)
        if len(queue) == 1 and session not in self._busy:
            self._ready.append(session)
            self._changed.notify()

    def pending(self) -> int:
        """The number of batches accepted and not yet done (queued or being committed)."""
        with self._lock:
            return len(self._unfinished)

    def flush(self, timeout: float | None = None, *, session: str | None = None) -> bool:
        """Wait until every batch accepted before this call is done (committed or failed),
        or only those of `session`; False if `timeout` seconds passed first. Batches accepted
        meanwhile are not waited for.

        Blocks the calling thread: on the event loop, await the batches' futures instead.
        """
        with self._lock:
            if session is None:
                waiting = list(self._unfinished)
            else:  # a session's batches commit in order: its newest is the last to be done
                last = self._last.get(session)
                waiting = [] if last is None else [last]
        _, not_done = wait(waiting, timeout=timeout)
        return not not_done

    def close(self, timeout: float = 5.0) -> bool:
        """Stop accepting batches, wait until every accepted one is done, and join the threads.

        Returns True once the threads ended within `timeout` seconds; otherwise logs
        `memory.writer.close_timed_out` and returns False, while the threads keep draining
        (call `close()` again to wait again). Idempotent.
        """
        with self._lock:
            if self._state == "open":
                self._state = "closing"
                self._changed.notify_all()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
        if any(thread.is_alive() for thread in self._threads):
            log.warning(
                "memory.writer.close_timed_out",
                writer=self.name,
                pending=self.pending(),
                timeout=timeout,
            )
            return False
        with self._lock:
            self._state = "closed"
        return True

    def __enter__(self) -> SessionWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<SessionWriter {self.name!r} state={self._state} pending={len(self._unfinished)}>"

    # -----------------------------------------------------------------------------------------

    def _work(self) -> None:
        """A writer thread: commit the oldest batch of the first ready session, until closed
        and drained."""
        while True:
            with self._lock:
                while not self._ready:
                    if self._state != "open" and not self._unfinished:
                        return
                    self._changed.wait()
                session = self._ready.popleft()
                queue = self._queues[session]
                batch = queue.popleft()
                if not queue:
                    del self._queues[session]
                self._busy.add(session)
            self._commit(session, batch)
            with self._lock:
                self._busy.discard(session)
                if session in self._queues:
                    self._ready.append(session)
                    self._changed.notify()
                del self._unfinished[batch.done]
                if self._last.get(session) is batch.done:
                    del self._last[session]
                if not self._unfinished and self._state != "open":
                    self._changed.notify_all()  # drained: the idle threads may end

    def _commit(self, session: str, batch: _Batch) -> None:
        """Append `batch` (or run its call) and settle its future (outside the lock)."""
        if batch.work is not None:
            try:
                result = batch.work()
            except BaseException as exc:  # the caller's to handle, on the future
                batch.done.set_exception(exc)
            else:
                batch.done.set_result(result)
            return
        try:
            self.memory.append(session, batch.messages)
        except BaseException as exc:  # settled on the future: the thread must go on
            log.error(
                "memory.append.failed",
                session=session,
                count=len(batch.messages),
                writer=self.name,
                exc_info=exc,
            )
            batch.done.set_exception(exc)
        else:
            batch.done.set_result(None)
