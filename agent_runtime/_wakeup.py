"""asyncio futures parked on a condition of a thread-safe object, woken from any thread."""

from __future__ import annotations

import asyncio
import contextlib


def resolve(fut: asyncio.Future[None]) -> None:
    """Set `fut`'s result unless it is already done (cancelled by its waiter)."""
    if not fut.done():
        fut.set_result(None)


class AsyncWaiters:
    """The asyncio side of a condition variable; every method must be called under the owner's lock.

    A coroutine checks its condition and calls `add_locked()` under the owner's lock, releases the
    lock, then awaits the future; whoever changes the condition calls `wake_all_locked()`, so no
    wake-up is lost. Waking resolves a future of the calling thread's loop at once and schedules
    the others' `set_result` with `call_soon_threadsafe`; neither blocks nor runs user code (a
    resolved future only schedules its waiter), so it is safe under the lock.
    """

    __slots__ = ("_waiters",)

    def __init__(self) -> None:
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def add_locked(self) -> asyncio.Future[None]:
        """Park a new future of the running loop; await it after releasing the lock."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._waiters.append((loop, fut))
        return fut

    def discard_locked(self, fut: asyncio.Future[None]) -> None:
        """Forget `fut` (after a timeout or cancellation of its waiter); idempotent."""
        self._waiters = [w for w in self._waiters if w[1] is not fut]

    def wake_local_locked(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Resolve the futures of `loop` (the calling thread's running loop) now and keep the
        others parked; True if any others are left (for a later `wake_all_locked`)."""
        if not self._waiters:
            return False
        mine = [w for w in self._waiters if w[0] is loop]
        if mine:
            self._waiters = [w for w in self._waiters if w[0] is not loop]
            for _, fut in mine:
                resolve(fut)
        return bool(self._waiters)

    def wake_all_locked(self) -> None:
        """Resolve every parked future (on its own loop) and forget them."""
        if not self._waiters:
            return
        waiters, self._waiters = self._waiters, []
        current = asyncio._get_running_loop()
        for loop, fut in waiters:
            if loop is current:
                # Same thread: resolved now (that only schedules its waiter, no user code runs),
                # neither through the loop's self-pipe nor a turn of the loop later.
                resolve(fut)
                continue
            with contextlib.suppress(RuntimeError):  # a closed loop has nobody left to wake
                loop.call_soon_threadsafe(resolve, fut)
