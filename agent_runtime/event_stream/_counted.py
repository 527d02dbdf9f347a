"""A condition variable that knows whether a thread waits on it."""

from __future__ import annotations

import threading


class CountedCondition:
    """`threading.Condition` on a shared lock, counting the threads waiting on it, so a
    notify with nobody waiting costs one comparison (streams notify once per event).

    Every method must be called with the lock held, as for `threading.Condition`.
    """

    __slots__ = ("_condition", "waiting")

    def __init__(self, lock: threading.RLock) -> None:
        self._condition = threading.Condition(lock)
        self.waiting = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting += 1
        try:
            return self._condition.wait(timeout)
        finally:
            self.waiting -= 1

    def notify(self, n: int = 1) -> None:
        if self.waiting:
            self._condition.notify(n)

    def notify_all(self) -> None:
        if self.waiting:
            self._condition.notify_all()
