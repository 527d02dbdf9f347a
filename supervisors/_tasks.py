"""TaskSupervisor: a bounded pool of worker threads whose task crashes stay in their futures."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

import pykka

from supervisors._actor import SupervisedActor, actor_of
from supervisors._describe import describe
from supervisors._handle import ActorHandle
from supervisors._log import get_logger

log = get_logger(__name__)

T = TypeVar("T")

# An idle worker thread exits after this long; the pool grows again on demand.
IDLE_SECONDS = 30.0


class _Item:
    __slots__ = ("args", "fn", "future", "kwargs")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]):
        self.future: Future[Any] = Future()
        self.fn, self.args, self.kwargs = fn, args, kwargs


class TaskPool:
    """Worker threads (daemon, created on demand up to `max_workers`) running queued calls.

    Thread-safe. The lock guards only the queue and counters; no task runs under it.
    """

    def __init__(self, max_workers: int, name: str) -> None:
        self.max_workers = max_workers
        self.name = name
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue: deque[_Item] = deque()
        self._threads: set[threading.Thread] = set()
        self._idle = 0
        self._running = 0
        self._closed = False

    def submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        item = _Item(fn, args, kwargs)
        with self._lock:
            if self._closed:
                raise RuntimeError(f"task supervisor {self.name!r} is stopped")
            self._queue.append(item)
            if len(self._queue) > self._idle and len(self._threads) < self.max_workers:
                thread = threading.Thread(
                    target=self._work, name=f"{self.name}-{len(self._threads)}", daemon=True
                )
                self._threads.add(thread)
                thread.start()
            self._wake.notify()
        item.future.add_done_callback(self._report)
        return item.future

    @property
    def closed(self) -> bool:
        """True once `stop` was called: no task is accepted any more."""
        with self._lock:
            return self._closed

    def active(self) -> int:
        """Tasks running or waiting to run."""
        with self._lock:
            return self._running + len(self._queue)

    def _work(self) -> None:
        me = threading.current_thread()
        while True:
            with self._lock:
                self._idle += 1
                while not self._queue and not self._closed:
                    if not self._wake.wait(timeout=IDLE_SECONDS) and not self._queue:
                        break
                self._idle -= 1
                if not self._queue:
                    self._threads.discard(me)
                    self._wake.notify_all()
                    return
                item = self._queue.popleft()
                self._running += 1
            try:
                if item.future.set_running_or_notify_cancel():
                    try:
                        item.future.set_result(item.fn(*item.args, **item.kwargs))
                    except BaseException as exc:  # isolated in the future
                        item.future.set_exception(exc)
            finally:
                del item  # not kept while the thread waits: its call may hold a whole run
                with self._lock:
                    self._running -= 1
                    self._wake.notify_all()

    def _report(self, future: Future[Any]) -> None:
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            log.warning(
                "tasks.task.failed",
                pool=self.name,
                error=describe(exc),
                exc_info=exc,
            )

    def stop(self, timeout: float | None) -> bool:
        """Cancel queued tasks, then wait up to `timeout` for running ones to finish.

        Returns True if every worker thread ended in time; tasks still running after that
        are abandoned (their threads are daemons and end when the task returns).
        """
        with self._lock:
            self._closed = True
            queued = list(self._queue)
            self._queue.clear()
            self._wake.notify_all()
        for item in queued:
            item.future.cancel()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._threads:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    log.warning("tasks.stop.abandoned", pool=self.name, running=self._running)
                    return False
                self._wake.wait(timeout=remaining)
        return True


class TaskPoolActor(SupervisedActor):
    def __init__(self, pool: TaskPool, stop_timeout: float) -> None:
        super().__init__()
        self.pool = pool
        self.stop_timeout = stop_timeout

    def on_stop(self) -> None:
        if not self.pool.closed:  # TaskSupervisor.stop already waited, with its own timeout
            self.pool.stop(self.stop_timeout)

    def on_exit(self, reason: object) -> None:
        self.pool.stop(0)


class TaskSupervisor(ActorHandle):
    """A bounded pool of worker threads under an actor, for blocking work (Task.Supervisor).

    `submit` never goes through the actor's mailbox: it queues directly. A task's exception
    (any BaseException) is kept in its Future and logged; it never reaches other tasks or the
    pool. The actor (`ref`) owns the pool's life: stopping or killing it stops the pool.
    """

    def __init__(self, ref: pykka.ActorRef[Any]) -> None:
        actor = actor_of(ref)
        if not isinstance(actor, TaskPoolActor):
            raise TypeError(f"{ref} is not a TaskSupervisor actor")
        super().__init__(ref)
        self._pool = actor.pool

    @classmethod
    def start(
        cls, max_workers: int | None = None, name: str | None = None, *, stop_timeout: float = 5.0
    ) -> TaskSupervisor:
        """Start a pool of at most `max_workers` threads (default: min(32, cpus + 4)).

        `stop_timeout` bounds how long stopping the actor waits for running tasks.

        Raises:
            ValueError: `max_workers < 1`.
        """
        if max_workers is None:
            max_workers = min(32, (os.cpu_count() or 1) + 4)
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError(f"invalid max_workers {max_workers!r} (expected an int >= 1)")
        pool = TaskPool(max_workers, name or "tasks")
        return cls(TaskPoolActor.start(pool, stop_timeout))

    @property
    def max_workers(self) -> int:
        """The most threads the pool runs at once."""
        return self._pool.max_workers

    def submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        """Run `fn(*args, **kwargs)` on a worker thread; its outcome is in the Future.

        Raises:
            RuntimeError: the supervisor was stopped.
        """
        return self._pool.submit(fn, *args, **kwargs)

    def active(self) -> int:
        """Tasks running or queued."""
        return self._pool.active()

    def drain(self, timeout: float | None = None) -> bool:
        """Stop taking tasks, cancel queued ones, wait up to `timeout` for running ones, and
        abandon the rest; the actor stays up (its own later stop then waits no more).

        For an owner that must bound a whole shutdown (a Runtime's `stop(timeout)`).
        Returns True if every running task finished in time.
        """
        return self._pool.stop(timeout)

    def stop(self, timeout: float | None = None) -> bool:
        """Cancel queued tasks, wait up to `timeout` for running ones, stop the actor.

        Returns True if every running task finished in time (the rest are abandoned).
        """
        finished = self._pool.stop(timeout)
        with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
            self._ref.stop(block=True, timeout=5.0)
        return finished
