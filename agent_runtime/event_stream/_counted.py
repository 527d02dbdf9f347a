"""A condition variable that knows whether a thread waits on it."""

from __future__ import annotations

import threading


class CountedCondition:
    """`threading.Condition` on a shared lock, counting the threads waiting on it, so a
    notify with nobody waiting costs one comparison (streams notify once per event). The
    `threading.Condition` is made when a thread first waits: a stream read only by coroutines
    never makes one.

    Every method must be called with the lock held, as for `threading.Condition`.
    """

    __slots__ = ("_condition", "_lock", "waiting")

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._condition: threading.Condition | None = None
        self.waiting = 0

    def wait(self, timeout: float | None = None) -> bool:
        condition = self._condition
        if condition is None:
            condition = self._condition = threading.Condition(self._lock)
        self.waiting += 1
        try:
            return condition.wait(timeout)
        finally:
            self.waiting -= 1

    def notify(self, n: int = 1) -> None:
        if self.waiting:
            assert self._condition is not None  # made by the waiter
            self._condition.notify(n)

    def notify_all(self) -> None:
        if self.waiting:
            assert self._condition is not None
            self._condition.notify_all()
