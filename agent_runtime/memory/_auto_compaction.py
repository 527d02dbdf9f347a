"""AutoCompaction: the trigger that compacts a session in the background once it grows too big."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Literal

from agent_runtime.abort import AbortSignal
from agent_runtime.memory._compaction import CompactionResult
from agent_runtime.telemetry import meter
from supervisors._log import get_logger

log = get_logger(__name__)

WORKERS = 2
"""Threads of one `AutoCompaction`: two sessions may be summarised at once."""

# No-ops until the application installs an OpenTelemetry SDK.
COMPACTIONS = meter().create_counter(
    "agent_runtime.memory.compactions",
    unit="{compaction}",
    description="Automatic compactions of session memory that replaced a history",
)
COMPACTION_FAILURES = meter().create_counter(
    "agent_runtime.memory.compaction_failures",
    unit="{compaction}",
    description="Automatic compactions of session memory that failed (nothing was changed)",
)

Compact = Callable[[str, AbortSignal], CompactionResult]
"""Compacts one session, watching the signal (`SessionMemory.compact_with` with a model)."""

_State = Literal["open", "closing", "closed"]


class AutoCompaction:
    """Compacts a session with a model, on threads of its own, once an append leaves the
    session's history bigger than `above_bytes` (Akka's CompactionAgent, built in).

    Made by `SessionMemory.auto_compact`, which reports every append to `added` with the
    history's size after it (`MemoryAdded.bytes`).

    Guarantees:
    - `added` never blocks, never calls the model and never touches the store: it queues the
      session when `size > above_bytes`, unless the session is already queued or being
      compacted, so one session has at most one compaction at a time and a burst of appends
      past the threshold asks for one compaction, not one per append.
    - Compactions run on `WORKERS` daemon threads of this object, never on an event loop (the
      model call itself runs on the LLM layer's sync bridge loop) and never while a lock of
      `SessionMemory` is held, so appends go on while a session is summarised; what they
      append is kept after the summary (see `SessionMemory.compact_with`).
    - A compaction that fails (the model failed or answered badly, the store failed, the
      history kept moving on) changes nothing, is logged as `memory.compaction.failed` with
      the session and the error's type only (never content), and is counted by `failures`
      and the metric `agent_runtime.memory.compaction_failures`. It is not retried in a loop:
      the next append that leaves the session past the threshold tries again.
    - A compaction whose kept tail alone is past the threshold leaves the session past it,
      so the next append compacts again: choose `above_bytes` well above the size of the
      `keep_last` newest messages.
    - `close()` stops accepting, drops the sessions still queued, aborts the model calls in
      flight (their compaction fails, changing nothing) and joins the threads.
    """

    def __init__(
        self, compact: Compact, *, above_bytes: int, name: str = "memory-compaction"
    ) -> None:
        if isinstance(above_bytes, bool) or not isinstance(above_bytes, int):
            raise TypeError(f"invalid above_bytes {above_bytes!r} (expected an int >= 1)")
        if above_bytes < 1:
            raise ValueError(f"invalid above_bytes {above_bytes!r} (expected an int >= 1)")
        self.above_bytes = above_bytes
        self.name = name
        self._compact = compact
        self._signal = AbortSignal()
        self._lock = threading.Lock()
        self._queued = threading.Condition(self._lock)  # the workers wait on it
        self._idle = threading.Condition(self._lock)  # wait_idle waits on it
        self._state: _State = "open"
        self._queue: deque[str] = deque()
        self._wanted: set[str] = set()  # queued or being compacted
        self._compactions = 0
        self._failures = 0
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(WORKERS)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def compactions(self) -> int:
        """Compactions that replaced a history so far."""
        with self._lock:
            return self._compactions

    @property
    def failures(self) -> int:
        """Compactions that failed so far."""
        with self._lock:
            return self._failures

    def pending(self) -> int:
        """Sessions queued or being compacted."""
        with self._lock:
            return len(self._wanted)

    def added(self, session: str, size: int) -> None:
        """Note that an append left `session`'s history `size` bytes big; queue a compaction
        when that is past the threshold (see the class guarantees). Never blocks."""
        if size <= self.above_bytes:
            return
        with self._lock:
            if self._state != "open" or session in self._wanted:
                return
            self._wanted.add(session)
            self._queue.append(session)
            self._queued.notify()
        log.debug("memory.compaction.queued", session=session, bytes=size)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no session is queued or being compacted; False if `timeout` seconds
        passed first. Blocks the calling thread."""
        with self._lock:
            return self._idle.wait_for(lambda: not self._wanted, timeout)

    def close(self, timeout: float = 5.0) -> bool:
        """Stop: drop the queued sessions, abort the compactions in flight, join the threads.

        Returns True once the threads ended within `timeout` seconds; otherwise logs
        `memory.compaction.close_timed_out` and returns False. Idempotent.
        """
        with self._lock:
            if self._state == "open":
                self._state = "closing"
                for session in self._queue:
                    self._wanted.discard(session)
                self._queue.clear()
                self._queued.notify_all()
                self._idle.notify_all()
        self._signal.abort("session memory closing")
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
        if any(thread.is_alive() for thread in self._threads):
            log.warning("memory.compaction.close_timed_out", trigger=self.name, timeout=timeout)
            return False
        with self._lock:
            self._state = "closed"
        return True

    def __repr__(self) -> str:
        return (
            f"<AutoCompaction {self.name!r} above_bytes={self.above_bytes} "
            f"state={self._state} pending={len(self._wanted)}>"
        )

    # -----------------------------------------------------------------------------------------

    def _work(self) -> None:
        """A trigger thread: compact the first queued session, until closed."""
        while True:
            with self._lock:
                while not self._queue and self._state == "open":
                    self._queued.wait()
                if self._state != "open":
                    return
                session = self._queue.popleft()
            try:
                self._run(session)
            finally:
                with self._lock:
                    self._wanted.discard(session)
                    if not self._wanted:
                        self._idle.notify_all()

    def _run(self, session: str) -> None:
        try:
            result = self._compact(session, self._signal)
        except Exception as exc:  # counted and logged: the thread must go on
            with self._lock:
                self._failures += 1
            error_type = type(exc).__name__
            COMPACTION_FAILURES.add(1, {"error.type": error_type})
            # The error's text may quote the history (a summary that did not validate): no
            # message, no traceback, only the type.
            log.warning("memory.compaction.failed", session=session, error_type=error_type)
            return
        if result.compacted:
            with self._lock:
                self._compactions += 1
            COMPACTIONS.add(1)
