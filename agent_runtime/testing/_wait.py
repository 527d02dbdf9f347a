"""Condition waits with deadlines, for tests and examples that must not sleep to synchronise."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(
    predicate: Callable[[], object], timeout: float = 5.0, interval: float = 0.005, what: str = ""
) -> None:
    """Return as soon as `predicate()` is truthy; raise `TimeoutError` after `timeout` seconds.

    The predicate is polled every `interval` seconds; the error names `what` (or the predicate).
    """
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"condition {what or predicate!r} not met within {timeout}s")
        time.sleep(interval)
