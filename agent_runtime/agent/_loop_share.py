"""LoopShare: the runs of an event loop take its iterations in turn when many fall due at once.

asyncio runs every callback that is ready in one iteration of its loop before it looks at its
timers and sockets again. When a hundred runs start in the same instant (a hundred requests
of a server that shares its loop with the runtime), their first steps (the start's events,
the first model call, a tool call streamed) all run in one iteration, and everything else on
the loop (the host's timers, its other requests) waits for the whole batch: ~50-80 ms for a
hundred runs, where each step takes well under a millisecond.

Like the BEAM's reduction count, which makes a process give way to the others once it has
worked for a while, a run asks its loop's share before each heavy step (its start, each
model call after the first): while the loop's current slice (`SLICE_SECONDS` of the
iteration's time, counted from the first run that asked in it) is not spent, it goes on at
once; after that it waits in line, and the next iterations let as many through as fit in a
slice each, in the order they asked. The runs' total work does not change; the steps of a
burst are spread over iterations, and the first runs of a burst get going sooner than when
the whole batch ran together.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections import deque

from agent_runtime._wakeup import resolve
from agent_runtime.abort import AbortSignal

# How much of an iteration the runs' heavy steps may take before the next run waits for the
# next iteration: the 1 ms DESIGN §1 allows a step of a run.
SLICE_SECONDS = 0.001

_SHARES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopShare] = (
    weakref.WeakKeyDictionary()
)


def loop_share(loop: asyncio.AbstractEventLoop) -> LoopShare:
    """The share of `loop` (one per event loop, whichever runtimes run on it); call on `loop`.
    It holds no reference to `loop` while no run waits, so it goes with it."""
    share = _SHARES.get(loop)
    if share is None:
        # A loop closed while runs waited is kept by their futures: forget it now.
        for closed in [other for other in _SHARES if other.is_closed()]:
            del _SHARES[closed]
        share = _SHARES[loop] = LoopShare()
    return share


class LoopShare:
    """Hands out the iterations of one event loop to the runs that ask for them. Used on that
    loop only (no lock).

    Guarantees: a run that asks goes on in this iteration if the slice is not spent and
    nobody waits; otherwise it goes on in a later iteration, after every run that asked before
    it and before every run that asks after it. Each iteration lets at least one waiting run
    through, so a wait ends however long others' steps take. An aborted run stops waiting at
    once.
    """

    __slots__ = ("_admitted", "_grant", "_granted_at", "_scheduled", "_started", "_waiting")

    def __init__(self) -> None:
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._started: float | None = None  # when this slice's first step went on
        self._admitted = 0  # steps let through in this slice
        self._grant = 1  # how many waiting runs an iteration lets through
        self._granted_at: float | None = None  # when the last ones were let through
        self._scheduled = False  # `_next_slice` is scheduled

    def admit(self, signal: AbortSignal | None = None) -> asyncio.Future[None] | None:
        """None: go on now. Else a future to await: done when the run's turn comes (or when
        `signal` aborts). Call on the share's loop."""
        loop = asyncio.get_running_loop()
        # Not while runs let through wait for the next iteration: they asked first.
        if not self._waiting and self._granted_at is None:
            now = time.perf_counter()
            started = self._started
            if started is None:
                self._started, self._admitted = now, 1
                self._schedule(loop)
                return None
            if now - started < SLICE_SECONDS:
                self._admitted += 1
                return None
        turn: asyncio.Future[None] = loop.create_future()
        self._waiting.append(turn)
        self._schedule(loop)
        if signal is not None:
            _wake_on_abort(loop, turn, signal)
        return turn

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._next_slice, loop)

    def _next_slice(self, loop: asyncio.AbstractEventLoop) -> None:
        """Runs in the iteration after the slice's steps (each step scheduled before it)."""
        self._scheduled = False
        now = time.perf_counter()
        if self._granted_at is not None:
            # The runs let through last time have just taken their steps: fit the next
            # grant to the slice (at least one, at most twice as many).
            spent = now - self._granted_at
            fitted = int(self._grant * SLICE_SECONDS / spent) if spent > 0 else 2 * self._grant
            self._grant = max(1, min(2 * self._grant, fitted))
        elif self._waiting:  # the slice overflowed: as many as went on in it, next time
            self._grant = max(1, self._admitted)
        self._started = self._granted_at = None
        if not self._waiting:
            return
        granted = 0
        while self._waiting and granted < self._grant:
            turn = self._waiting.popleft()
            if not turn.done():  # not aborted, its task not cancelled
                turn.set_result(None)
                granted += 1
        if not granted:  # every one left had stopped waiting
            return
        self._started = self._granted_at = time.perf_counter()
        self._admitted = granted
        self._schedule(loop)


def _wake_on_abort(
    loop: asyncio.AbstractEventLoop, turn: asyncio.Future[None], signal: AbortSignal
) -> None:
    def on_abort(_: AbortSignal) -> None:  # on whichever thread aborts
        with contextlib.suppress(RuntimeError):  # the loop closed: its runs are gone
            loop.call_soon_threadsafe(resolve, turn)

    remove = signal.on_abort(on_abort)
    turn.add_done_callback(lambda _: remove())
