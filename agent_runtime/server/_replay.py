"""ReplayBuffer: one SSE stream's numbered frames, the last N kept for `Last-Event-ID` resume.

Guarantees (each checked by tests/agent_runtime/server/test_replay.py):
- Ids start at 1 and grow by one per frame, with no gap: a reader that saw id L and asks for
  what follows gets L+1, L+2, ... while those are still kept.
- At most `capacity` frames are kept; what fell out before a reader got to it is reported to
  that reader as a count (`Window.dropped`), never skipped silently.
- `wait` wakes every waiting reader once per append or close; readers never block the writer
  and hold no buffer of their own, so N readers cost N cursors, not N copies.
- Everything runs on one asyncio loop (the server's): no lock.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Window(Generic[T]):
    """What a reader that last saw id `after` gets now: `dropped` frames it can no longer
    have (they fell out of the buffer), then `frames` as `(id, bytes)` in id order."""

    dropped: int
    first_id: int  # the id of the first frame it can have (after + dropped + 1)
    frames: list[tuple[int, T]]


class ReplayBuffer(Generic[T]):
    """The last `capacity` frames of one stream, numbered from 1 (see the module docstring)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"invalid replay buffer capacity {capacity!r} (expected >= 1)")
        self.capacity = capacity
        self._frames: collections.deque[T] = collections.deque(maxlen=capacity)
        self._last_id = 0
        self._changed = asyncio.Event()
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
        self._last_id += 1
        self._frames.append(frame)
        self._wake()
        return self._last_id

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

    async def wait(self, last_seen: int, timeout: float) -> bool:
        """Wait until a frame after `last_seen` is kept or the buffer closes; False when
        `timeout` seconds passed first."""
        if self._last_id > last_seen or self.closed:
            return True
        changed = self._changed
        try:
            await asyncio.wait_for(changed.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def _wake(self) -> None:
        # One Event per generation: set wakes everyone waiting on it, the next wait gets a
        # fresh one, so no reader can miss an append between its check and its wait.
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
