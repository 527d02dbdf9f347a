"""A one-shot gate for threads: shut until opened once, then open for every waiter."""

from __future__ import annotations

import threading


class Gate:
    """A one-shot `threading.Event` on one C lock, held until `open()`.

    A wait is one C call with no Python code around the lock. An Event's wait has some, and a
    finalizer that a collection runs there (on 3.13, between any two calls) and that sets the
    same Event hangs the waiting thread on the Event's own lock.

    Guarantees: `wait` returns True once `open()` was called (at once for a wait after it),
    False if `timeout` passed first; every waiter is let through. `open()` must be called at
    most once: its owner sees to that under its own lock.
    """

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def open(self) -> None:
        """Let every waiter through, now and later (call once)."""
        self._lock.release()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until opened; False if `timeout` seconds passed first (None: no bound)."""
        if timeout is None:
            passed = self._lock.acquire()
        else:
            passed = self._lock.acquire(timeout=max(timeout, 0.0))
        if passed:
            self._lock.release()  # open for the other waiters too
        return passed
