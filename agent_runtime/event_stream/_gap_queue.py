"""GapQueue: a FIFO that remembers how many items overflow dropped before each item it holds."""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict

T = TypeVar("T")


class StreamStats(BaseModel):
    """A consistent snapshot of an `EventStream`'s counters.

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

    The owner enforces the capacity and guards every call with its lock. Gaps take no space: they
    are attached to the next item queued after them (or stay at the tail until one arrives).

    Counters (`accepted == delivered + evicted + len(queue)` at all times):
    `accepted` items appended, `delivered` items popped by readers, `evicted` items removed by
    `evict()`, `refused` items never queued (`refuse()`).
    """

    __slots__ = (
        "_gaps",
        "_head",
        "_items",
        "_tail_gap",
        "accepted",
        "delivered",
        "evicted",
        "refused",
    )

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._head = 0  # absolute index of _items[0]
        self._gaps: dict[int, int] = {}  # absolute index -> items dropped right before it
        self._tail_gap = 0  # items dropped after the last queued item
        self.accepted = self.delivered = self.evicted = self.refused = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def dropped(self) -> int:
        """Every item lost to overflow: `evicted + refused`."""
        return self.evicted + self.refused

    def append(self, item: T) -> None:
        """Queue `item`; a pending tail gap becomes the gap before it."""
        if self._tail_gap:
            self._gaps[self._head + len(self._items)] = self._tail_gap
            self._tail_gap = 0
        self._items.append(item)
        self.accepted += 1

    def refuse(self) -> None:
        """Count one new item dropped at the door (it opens or widens the tail gap)."""
        self.refused += 1
        self._tail_gap += 1

    def evict(self) -> None:
        """Drop the oldest item; it and the gap before it join the gap before the next item."""
        self._items.popleft()
        carry = self._gaps.pop(self._head, 0) + 1
        self._head += 1
        self.evicted += 1
        if self._items:
            self._gaps[self._head] = self._gaps.get(self._head, 0) + carry
        else:
            self._tail_gap += carry

    def popleft(self) -> tuple[int, T]:
        """Remove the oldest item, counting it delivered; return it with the gap before it."""
        item = self._items.popleft()
        gap = self._gaps.pop(self._head, 0) if self._gaps else 0
        self._head += 1
        self.delivered += 1
        return gap, item

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
