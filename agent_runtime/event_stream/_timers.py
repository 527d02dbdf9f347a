"""One shared daemon thread that runs callbacks at deadlines (a heap), for many cheap timers.

Used by `EventStream(timeout=...)` so that a stream's lifetime bound costs a heap entry, not a
thread. Callbacks run on the timer thread, one at a time, and must be quick and non-blocking; an
exception escaping a callback is logged and does not stop the thread.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable

from supervisors._log import get_logger

log = get_logger(__name__)


class TimerHandle:
    """A scheduled callback; `cancel()` prevents it from running if it has not started yet."""

    __slots__ = ("_callback", "_wheel", "deadline")

    def __init__(self, wheel: _TimerThread, deadline: float, callback: Callable[[], object]):
        self._wheel = wheel
        self._callback: Callable[[], object] | None = callback
        self.deadline = deadline

    @property
    def cancelled(self) -> bool:
        """True once cancelled or run."""
        return self._callback is None

    def cancel(self) -> None:
        """Cancel the callback; idempotent, safe from any thread (also from inside the callback)."""
        self._wheel.cancel(self)


class _TimerThread:
    """The heap of deadlines and the daemon thread that serves it (started on first use)."""

    def __init__(self) -> None:
        # Reentrant: a collection that starts while a thread holds it (at an allocation) runs
        # finalizers there, and a forgotten subscription's finalizer cancels its stream's
        # timer. With a plain lock that thread hung for good.
        self._cond = threading.Condition(threading.RLock())
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._counter = itertools.count()
        self._cancelled = 0
        self._thread: threading.Thread | None = None

    def schedule(self, delay: float, callback: Callable[[], object]) -> TimerHandle:
        handle = TimerHandle(self, time.monotonic() + delay, callback)
        entry = (handle.deadline, next(self._counter), handle)  # made before the lock: see above
        with self._cond:
            heapq.heappush(self._heap, entry)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="agent-runtime-timers", daemon=True
                )
                self._thread.start()
            if self._heap[0][2] is handle:
                self._cond.notify()
        return handle

    def cancel(self, handle: TimerHandle) -> None:
        with self._cond:
            if handle._callback is None:
                return
            handle._callback = None
            self._cancelled += 1
            # Cancelled entries wait in the heap until their deadline; compact when they dominate.
            if self._cancelled > 64 and self._cancelled * 2 > len(self._heap):
                self._heap = [e for e in self._heap if e[2]._callback is not None]
                heapq.heapify(self._heap)
                self._cancelled = 0

    def pending(self) -> int:
        """Number of scheduled, not cancelled callbacks (for tests)."""
        with self._cond:
            return sum(1 for e in self._heap if e[2]._callback is not None)

    def _run(self) -> None:
        while True:
            with self._cond:
                callback = self._next_due_locked()
            try:
                callback()
            except Exception:
                log.exception("timers.callback.failed", callback=repr(callback))

    def _next_due_locked(self) -> Callable[[], object]:
        while True:
            if not self._heap:
                self._cond.wait()
                continue
            deadline, _, handle = self._heap[0]
            if handle._callback is None:
                heapq.heappop(self._heap)
                self._cancelled = max(0, self._cancelled - 1)
                continue
            now = time.monotonic()
            if deadline > now:
                self._cond.wait(deadline - now)
                continue
            heapq.heappop(self._heap)
            callback, handle._callback = handle._callback, None
            return callback


_TIMERS = _TimerThread()


def call_later(delay: float, callback: Callable[[], object]) -> TimerHandle:
    """Run `callback()` on the shared timer thread after `delay` seconds (monotonic clock).

    Guarantees: callbacks with earlier deadlines run first; a cancelled callback never runs; no
    lock is held while a callback runs.
    """
    return _TIMERS.schedule(delay, callback)


def pending_timers() -> int:
    """Number of scheduled, not yet run or cancelled callbacks on the shared timer thread."""
    return _TIMERS.pending()


def deadline_after(timeout: float | None, what: str = "timeout") -> float | None:
    """The monotonic deadline `timeout` seconds from now (None: no deadline).

    Raises:
        ValueError: `timeout < 0`; the message names `what` and the value.
    """
    if timeout is None:
        return None
    if timeout < 0:
        raise ValueError(f"invalid {what} {timeout!r} (expected seconds >= 0, or None)")
    return time.monotonic() + timeout


def remaining(deadline: float | None) -> float | None:
    """Seconds left until `deadline` (negative once passed; None: no deadline)."""
    return None if deadline is None else deadline - time.monotonic()
