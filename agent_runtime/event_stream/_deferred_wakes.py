"""Readers on other threads woken once per turn of the producing event loop, not per event.

A run's driver offers its events on the runtime's loop thread, often many in one go (a
provider's read can hold dozens of tokens). Waking a reader thread for each of them makes the
two threads trade the GIL per event; a wake-up that waits for the end of the loop's current
step lets the reader take them as one batch, at the cost of no more latency than the
producer's own step (it gives the GIL away only when it waits anyway).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

_local = threading.local()


def wake_after_step(loop: asyncio.AbstractEventLoop, wake: Callable[[], None]) -> None:
    """Call `wake()` on `loop`'s thread once the loop's current step is over (with the other
    wakes of that step, in order). Must be called on `loop`'s own thread; `wake` must be quick,
    must not raise and must not run user code."""
    pending: _Pending | None = getattr(_local, "pending", None)
    if pending is None or pending.loop is not loop:  # (a loop closed before its turn ended)
        pending = _local.pending = _Pending(loop)
        loop.call_soon(_wake_all, pending)
    pending.wakes.append(wake)


class _Pending:
    __slots__ = ("loop", "wakes")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.wakes: list[Callable[[], None]] = []


def _wake_all(pending: _Pending) -> None:
    if getattr(_local, "pending", None) is pending:
        _local.pending = None
    for wake in pending.wakes:
        wake()
