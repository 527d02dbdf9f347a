"""MemorySubscription: one reader's bounded queue of a session's memory events."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterator
from types import TracebackType

import structlog

from agent_runtime._errors import StreamOverflow
from agent_runtime.memory._models import MemoryEvent

log = structlog.get_logger(__name__)


class MemorySubscription:
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
        if isinstance(max_queue, bool) or not isinstance(max_queue, int) or max_queue < 1:
            raise ValueError(f"invalid max_queue {max_queue!r} (expected an int >= 1)")
        self.session = session
        self.max_queue = max_queue
        self._on_close = on_close
        self._cond = threading.Condition(threading.Lock())
        self._queue: collections.deque[MemoryEvent] = collections.deque()
        self._closed = False
        self._overflowed = False

    @property
    def closed(self) -> bool:
        """True once closed or overflowed (queued events may remain to be read)."""
        return self._closed

    @property
    def overflowed(self) -> bool:
        """True if the subscription was closed because its reader fell `max_queue` behind."""
        return self._overflowed

    def poll(self, timeout: float | None = None) -> MemoryEvent | None:
        """The next event, waiting up to `timeout` seconds (None: until one comes or the
        subscription is closed); None on timeout or once closed and drained.

        Raises:
            StreamOverflow: closed by an overflow and every queued event was read.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._queue:
                if self._closed:
                    if self._overflowed:
                        raise StreamOverflow(
                            f"memory subscription to session {self.session!r} overflowed: "
                            f"the reader fell {self.max_queue} events behind"
                        )
                    return None
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left)
            return self._queue.popleft()

    def events(self, timeout: float | None = None) -> Iterator[MemoryEvent]:
        """Events until the subscription is closed and drained, or until none came for
        `timeout` seconds (None: no idle limit).

        Raises:
            StreamOverflow: as `poll`.
        """
        while (event := self.poll(timeout)) is not None:
            yield event

    def __iter__(self) -> Iterator[MemoryEvent]:
        """Events until the subscription is closed and drained (`events(None)`)."""
        return self.events(None)

    def close(self) -> None:
        """Unsubscribe; queued events can still be read. Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        if self._on_close is not None:
            self._on_close(self)

    def offer(self, event: MemoryEvent) -> bool:
        """Queue `event` without waiting; False once closed (the publisher then forgets this
        subscription). A full queue closes the subscription as an overflow."""
        with self._cond:
            if self._closed:
                return False
            if len(self._queue) < self.max_queue:
                self._queue.append(event)
                self._cond.notify()
                return True
            self._closed = self._overflowed = True
            self._cond.notify_all()
        log.warning(
            "memory.subscription.overflowed", session=self.session, max_queue=self.max_queue
        )
        return False

    def __enter__(self) -> MemorySubscription:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<MemorySubscription session={self.session!r} queued={len(self._queue)} "
            f"closed={self._closed} overflowed={self._overflowed}>"
        )
