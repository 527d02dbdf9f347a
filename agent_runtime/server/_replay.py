"""ReplayBuffer: one SSE stream's numbered frames, the last N kept for `Last-Event-ID` resume.

Guarantees (each checked by tests/agent_runtime/server/test_replay.py):
- Ids start at 1 and grow by one per frame, with no gap: a reader that saw id L and asks for
  what follows gets L+1, L+2, ... while those are still kept.
- At most `capacity` frames are kept; what fell out before a reader got to it (by capacity,
  or dropped by `trim` / `discard` to keep a byte budget) is reported to that reader as a
  count (`Window.dropped`), never skipped silently.
- With a `ByteBudget`, the bytes of the kept frames (`size(frame)` each) are counted in it
  as they are kept and released as they fall out: `budget.used` is the bytes that every
  buffer sharing it holds, exactly. Whoever owns the buffers enforces the bound (`trim`,
  `discard`); a buffer never refuses a frame.
- A buffer may start after a given id (`start_after`): a stream that goes on from an earlier
  one keeps its ids.
- `wait` wakes every waiting reader once per append or close; readers never block the writer
  and hold no buffer of their own, so N readers cost N cursors, not N copies.
- Everything runs on one asyncio loop (the server's): no lock.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from agent_runtime.event_stream._alarm import LoopAlarm

T = TypeVar("T")


class ByteBudget:
    """The bytes held by the replay buffers that share it (`used`) against `limit`.

    Only counts: the owner of the buffers compares and evicts (see `EventHub`)."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"invalid replay byte budget {limit!r} (expected bytes >= 1)")
        self.limit = limit
        self.used = 0

    @property
    def over(self) -> int:
        """How many bytes over the limit the buffers are now (0 within it)."""
        return max(self.used - self.limit, 0)


@dataclass(frozen=True, slots=True)
class Window(Generic[T]):
    """What a reader that last saw id `after` gets now: `dropped` frames it can no longer
    have (they fell out of the buffer), then `frames` as `(id, bytes)` in id order."""

    dropped: int
    first_id: int  # the id of the first frame it can have (after + dropped + 1)
    frames: list[tuple[int, T]]


class ReplayBuffer(Generic[T]):
    """The last `capacity` frames of one stream, numbered from 1 (see the module docstring)."""

    def __init__(
        self,
        capacity: int,
        *,
        start_after: int = 0,
        budget: ByteBudget | None = None,
        size: Callable[[T], int] | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"invalid replay buffer capacity {capacity!r} (expected >= 1)")
        if budget is not None and size is None:
            raise ValueError("a replay buffer with a byte budget needs the size of a frame")
        self.capacity = capacity
        self._frames: collections.deque[T] = collections.deque()
        self._sizes: collections.deque[int] = collections.deque()
        self._budget = budget
        self._size = size
        self.nbytes = 0  # the bytes of the frames kept (0 without a budget)
        self._last_id = start_after
        self._waiters: list[asyncio.Future[None]] = []  # readers waiting for the next frame
        self.closed = False
        self.readers = 0  # SSE responses reading it now (kept by `_sse.frames`)

    @property
    def last_id(self) -> int:
        """The id of the newest frame (0 before the first)."""
        return self._last_id

    @property
    def first_id(self) -> int:
        """The id of the oldest frame still kept (last_id + 1 when none is)."""
        return self._last_id - len(self._frames) + 1

    def __len__(self) -> int:
        return len(self._frames)

    def append(self, frame: T) -> int:
        """Keep `frame` as the next id (returned); the oldest frame falls out when full."""
        if len(self._frames) >= self.capacity:
            self.trim(len(self._frames) - self.capacity + 1)
        self._last_id += 1
        self._frames.append(frame)
        if self._budget is not None:
            assert self._size is not None
            size = self._size(frame)
            self._sizes.append(size)
            self.nbytes += size
            self._budget.used += size
        self._wake()
        return self._last_id

    def trim(self, count: int) -> int:
        """Let the `count` oldest frames fall out (readers that had not got them are told
        how many they lost); returns the bytes released."""
        released = 0
        for _ in range(min(count, len(self._frames))):
            self._frames.popleft()
            if self._sizes:
                released += self._sizes.popleft()
        self.nbytes -= released
        if self._budget is not None:
            self._budget.used -= released
        return released

    def discard(self) -> int:
        """Let every frame fall out, keeping the ids (`last_id`); returns the bytes released."""
        return self.trim(len(self._frames))

    def close(self) -> None:
        """No frame follows: readers get what is kept, then the end."""
        self.closed = True
        self._wake()

    def after(self, last_seen: int) -> Window[T]:
        """The frames a reader that last saw id `last_seen` has not seen yet.

        A `last_seen` beyond the newest id (a client of an earlier server process, whose ids
        restarted) is read as "from now on": nothing is replayed and nothing reported lost.
        """
        last_seen = max(last_seen, 0)
        if last_seen >= self._last_id:
            return Window(0, self._last_id + 1, [])
        first = self.first_id
        start = max(last_seen + 1, first)
        skip = start - first
        frames = list(zip(itertools.count(start), itertools.islice(self._frames, skip, None)))
        return Window(start - last_seen - 1, start, frames)

    async def wait(self, last_seen: int, alarm: LoopAlarm) -> bool:
        """Wait until a frame after `last_seen` is kept or the buffer closes; False when the
        deadline of `alarm` (the reader's keepalive) came first."""
        if self._last_id > last_seen or self.closed:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            return await alarm.wait(fut)
        finally:
            if not fut.done() or fut.cancelled():  # not woken by a frame: forget it
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)

    def _wake(self) -> None:
        # Every reader that waits now is woken; one that checks after this sees the frame.
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
