"""GapQueue: a FIFO that remembers how many items overflow dropped before each item it holds."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict

T = TypeVar("T")


class StreamStats(BaseModel):
    """A consistent snapshot of an `EventStream`'s counters.

    - `queue_size`: events queued now. The run terminals a multi-run stream (a subscription)
      holds take no space, so there it may exceed `max_queue` by their number.
    - `accepted`: events that entered the queue.
    - `delivered`: accepted events handed to a reader (markers and the terminal not counted).
    - `evicted`: accepted events pushed out of a full queue by `drop_oldest`.
    - `dropped`: every event not delivered because of overflow: `evicted` plus the events turned
      away at a full queue (`drop_newest`, or `push_async` under `error`/`block`). Events refused
      with a `StreamOverflow` or `StreamClosed` exception are not counted: their pusher knows.

    Invariant (in every snapshot): `accepted == delivered + evicted + queue_size`. Once every
    event was read, the `EventsDropped.count`s that readers saw add up to `dropped`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    queue_size: int
    max_queue: int
    dropped: int
    accepted: int
    delivered: int
    evicted: int


class GapQueue(Generic[T]):
    """A FIFO of items plus the count of items dropped right before each one (not thread-safe).

    The owner enforces the capacity against `held` and guards every call with its lock. Gaps take
    no space: they are attached to the next item queued after them (or stay at the tail until one
    arrives). Items the `pinned` predicate selects (the run terminals of a multi-run stream) take
    no space either and are never evicted: `evict()` removes the oldest unpinned item, and its gap
    moves on to the item after it, pinned or not, so a reader still sees it.

    Counters (`accepted == delivered + evicted + len(queue)` at all times):
    `accepted` items appended, `delivered` items popped by readers, `evicted` items removed by
    `evict()`, `refused` items never queued (`refuse()`).
    """

    __slots__ = (
        "_gapped",
        "_gaps",
        "_is_pinned",
        "_items",
        "_pinned",
        "_tail_gap",
        "accepted",
        "delivered",
        "evicted",
        "refused",
    )

    def __init__(self, pinned: Callable[[T], bool] | None = None) -> None:
        self._items: deque[T] = deque()
        self._gaps: deque[int] = deque()  # _gaps[i]: items dropped right before _items[i]
        self._gapped = 0  # how many of _gaps are not 0 (none: a reader may take items in bulk)
        self._tail_gap = 0  # items dropped after the last queued item
        self._is_pinned = pinned
        self._pinned = 0  # how many queued items are pinned
        self.accepted = self.delivered = self.evicted = self.refused = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def held(self) -> int:
        """Queued items that take space: every item but the pinned ones."""
        return len(self._items) - self._pinned

    @property
    def dropped(self) -> int:
        """Every item lost to overflow: `evicted + refused`."""
        return self.evicted + self.refused

    def append(self, item: T, pinned: bool | None = None) -> None:
        """Queue `item`; a pending tail gap becomes the gap before it. `pinned`: whether it
        is, if the caller knows already (else the queue's `pinned` tells)."""
        self._items.append(item)
        self._gaps.append(self._tail_gap)
        if self._tail_gap:
            self._gapped += 1
            self._tail_gap = 0
        self.accepted += 1
        if pinned is None:
            pinned = self._is_pinned is not None and self._is_pinned(item)
        if pinned:
            self._pinned += 1

    def extend(self, items: Sequence[T]) -> None:
        """`append` of each of `items`, none of them pinned, in one go."""
        count = len(items)
        if not count:
            return
        self._items.extend(items)
        gaps = self._gaps
        gaps.append(self._tail_gap)
        if count > 1:
            gaps.extend(itertools.repeat(0, count - 1))
        if self._tail_gap:
            self._gapped += 1
            self._tail_gap = 0
        self.accepted += count

    def append_within(self, item: T, room: int) -> bool:
        """`append` of an unpinned `item` while fewer than `room` items take space; False,
        nothing queued, when they fill it (the owner's overflow policy decides then)."""
        if self.held >= room:
            return False
        self.append(item, False)
        return True

    def refuse(self) -> None:
        """Count one new item dropped at the door (it opens or widens the tail gap)."""
        self.refused += 1
        self._tail_gap += 1

    def evict(self) -> None:
        """Drop the oldest unpinned item; it and the gap before it join the gap before the next
        item (the tail gap if it was the last).

        Raises:
            IndexError: every queued item is pinned (`held == 0`); the queue is unchanged.
        """
        i = 0
        if self._pinned:
            assert self._is_pinned is not None
            while i < len(self._items) and self._is_pinned(self._items[i]):
                i += 1
        if i == len(self._items):
            raise IndexError("no unpinned item to evict")
        carry = self._gaps[i] + 1
        if carry > 1:  # that gap leaves with its item
            self._gapped -= 1
        if i == 0:
            self._items.popleft()
            self._gaps.popleft()
        else:
            del self._items[i]
            del self._gaps[i]
        self.evicted += 1
        if i < len(self._items):
            if not self._gaps[i]:
                self._gapped += 1
            self._gaps[i] += carry
        else:
            self._tail_gap += carry

    def popleft(self) -> tuple[int, T]:
        """Remove the oldest item, counting it delivered; return it with the gap before it."""
        item = self._items.popleft()
        gap = self._gaps.popleft()
        if gap:
            self._gapped -= 1
        self.delivered += 1
        if self._pinned and self._is_pinned is not None and self._is_pinned(item):
            self._pinned -= 1
        return gap, item

    def take_ungapped(self, limit: int) -> list[T]:
        """Remove up to `limit` oldest items at once, counted delivered, when no gap lies
        before any queued item; else (or when empty) `[]`, and `popleft` hands out each
        item with its gap. The reader's common case: nothing dropped, no marker to place."""
        items = self._items
        if self._gapped or not items:
            return []
        if limit >= len(items):
            out = list(items)
            items.clear()
            self._gaps.clear()
        else:
            take, skip = items.popleft, self._gaps.popleft
            out = [take() for _ in range(limit)]
            for _ in range(limit):
                skip()
        self.delivered += len(out)
        if self._pinned:
            assert self._is_pinned is not None
            self._pinned -= sum(1 for item in out if self._is_pinned(item))
        return out

    def pop_tail_gap(self) -> int:
        """Return and clear the gap after the last item (for the marker before the terminal)."""
        gap, self._tail_gap = self._tail_gap, 0
        return gap

    def stats(self, max_queue: int) -> StreamStats:
        """A snapshot of the counters."""
        return StreamStats(
            queue_size=len(self._items),
            max_queue=max_queue,
            dropped=self.dropped,
            accepted=self.accepted,
            delivered=self.delivered,
            evicted=self.evicted,
        )
