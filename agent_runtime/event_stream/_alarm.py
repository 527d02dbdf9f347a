"""One timer for an async reader's whole deadline, in place of a timer for each of its waits."""

from __future__ import annotations

import asyncio
import time


class LoopAlarm:
    """The deadline of one async reader, as one timer on its event loop: armed at the
    reader's first wait, it ends whichever wait is current when the deadline comes.

    `deadline` (on `time.monotonic()`'s clock) may be moved later at any time, as an SSE
    keepalive restarts with each frame: the timer is not moved then, but when it fires
    before the deadline it arms itself again for what is left (so do the loop's coarser
    clocks, uvloop's in ms, when they fire a little early).

    A reader that waits for each event (a streamed token a loop step, as tokens arrive from
    a network) so arms no timer per wait: `asyncio.timeout` around each wait cost ~6 us of
    loop CPU per streamed token (26 against 20 us a token, 2026-12-07), most of it heap
    work for timers cancelled at once. Not thread-safe: one reader, on one loop.
    """

    __slots__ = ("_handle", "_loop", "_rang", "_waiting", "deadline")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._waiting: asyncio.Future[None] | None = None
        self._rang = False

    async def wait(self, fut: asyncio.Future[None]) -> bool:
        """Await `fut` until the deadline: True once `fut` is done, False when the deadline
        came first (`fut` is then cancelled). A cancellation of the waiting task propagates."""
        if self._handle is None or self._rang:
            self._rang = False
            self._arm(asyncio.get_running_loop())
        self._waiting = fut
        task = asyncio.current_task()
        cancelling = task.cancelling() if task is not None else 0  # as asyncio.timeout does
        try:
            await fut
        except asyncio.CancelledError:
            cancelled = task is not None and task.cancelling() > cancelling
            if self._rang and fut.cancelled() and not cancelled:
                return False
            raise
        finally:
            self._waiting = None
        return True

    def cancel(self) -> None:
        """The reader is done: the timer goes (idempotent; a later wait arms a new one)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        left = max(self.deadline - time.monotonic(), 0.0)
        self._handle = loop.call_at(loop.time() + left, self._ring)

    def _ring(self) -> None:
        if self.deadline > time.monotonic():  # moved later, or a coarse clock: not yet
            assert self._loop is not None
            self._arm(self._loop)
            return
        self._rang = True
        fut = self._waiting
        if fut is not None:
            fut.cancel()
