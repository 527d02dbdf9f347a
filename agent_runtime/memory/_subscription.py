"""MemorySubscription: one reader's bounded queue of a session's memory events."""

from __future__ import annotations

from collections.abc import Callable

from agent_runtime.memory._bounded import BoundedSubscription
from agent_runtime.memory._models import MemoryEvent
from supervisors._log import get_logger

log = get_logger(__name__)


class MemorySubscription(BoundedSubscription[MemoryEvent]):
    """The `MemoryAdded` / `MemoryCompacted` events of one session, in the order of their
    `sequence`, for one reader.

    Thread-safe. Writers never wait for the reader: when `max_queue` events are waiting, the
    subscription is closed instead (an overflow) and the reader gets `StreamOverflow` after
    the events already queued, so a reader never misses an event silently; it can subscribe
    again and reload the history. `close()` (or leaving the `with` block, or dropping the
    object) unsubscribes and wakes a blocked reader, which then gets what is queued and stops.
    """

    def __init__(
        self,
        session: str,
        *,
        max_queue: int = 1000,
        on_close: Callable[[MemorySubscription], None] | None = None,
    ) -> None:
        super().__init__(max_queue=max_queue, on_close=on_close)
        self.session = session

    def _overflow_message(self) -> str:
        return (
            f"memory subscription to session {self.session!r} overflowed: "
            f"the reader fell {self.max_queue} events behind"
        )

    def _log_overflow(self) -> None:
        log.warning(
            "memory.subscription.overflowed", session=self.session, max_queue=self.max_queue
        )

    def __enter__(self) -> MemorySubscription:
        return self

    def __repr__(self) -> str:
        return (
            f"<MemorySubscription session={self.session!r} queued={len(self._queue)} "
            f"closed={self._closed} overflowed={self._overflowed}>"
        )
