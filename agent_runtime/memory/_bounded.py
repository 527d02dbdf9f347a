"""BoundedSubscription: one reader's bounded queue of changes that writers never wait for."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, Generic, TypeVar

from agent_runtime._errors import StreamOverflow

T = TypeVar("T")


class BoundedSubscription(Generic[T]):
    """Changes in the order they were offered, for one reader.

    Thread-safe. Writers never wait for the reader: when `max_queue` changes are waiting, the
    subscription is closed instead (an overflow) and the reader gets `StreamOverflow` after
    the changes already queued, so it never misses one silently. `close()` (or leaving the
    `with` block) unsubscribes and wakes a blocked reader, which then gets what is queued and
    stops. Subclasses name what they follow (`_overflow_message`, `_log_overflow`).
    """

    def __init__(self, *, max_queue: int, on_close: Callable[[Any], None] | None) -> None:
        if isinstance(max_queue, bool) or not isinstance(max_queue, int) or max_queue < 1:
            raise ValueError(f"invalid max_queue {max_queue!r} (expected an int >= 1)")
        self.max_queue = max_queue
        self._on_close = on_close
        self._cond = threading.Condition(threading.Lock())
        self._queue: collections.deque[T] = collections.deque()
        self._closed = False
        self._overflowed = False

    @property
    def closed(self) -> bool:
        """True once closed or overflowed (queued changes may remain to be read)."""
        return self._closed

    @property
    def overflowed(self) -> bool:
        """True if the subscription was closed because its reader fell `max_queue` behind."""
        return self._overflowed

    def poll(self, timeout: float | None = None) -> T | None:
        """The next change, waiting up to `timeout` seconds (None: until one comes or the
        subscription is closed); None on timeout or once closed and drained.

        Raises:
            StreamOverflow: closed by an overflow and every queued change was read.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._queue:
                if self._closed:
                    if self._overflowed:
                        raise StreamOverflow(self._overflow_message())
                    return None
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left)
            return self._queue.popleft()

    def events(self, timeout: float | None = None) -> Iterator[T]:
        """Changes until the subscription is closed and drained, or until none came for
        `timeout` seconds (None: no idle limit).

        Raises:
            StreamOverflow: as `poll`.
        """
        while (change := self.poll(timeout)) is not None:
            yield change

    def __iter__(self) -> Iterator[T]:
        """Changes until the subscription is closed and drained (`events(None)`)."""
        return self.events(None)

    def close(self) -> None:
        """Unsubscribe; queued changes can still be read. Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        if self._on_close is not None:
            self._on_close(self)

    def offer(self, change: T) -> bool:
        """Queue `change` without waiting; False once closed (the publisher then forgets this
        subscription). A full queue closes the subscription as an overflow."""
        with self._cond:
            if self._closed:
                return False
            if len(self._queue) < self.max_queue:
                self._queue.append(change)
                self._cond.notify()
                return True
            self._closed = self._overflowed = True
            self._cond.notify_all()
        self._log_overflow()
        return False

    def _overflow_message(self) -> str:
        return f"subscription overflowed: the reader fell {self.max_queue} changes behind"

    def _log_overflow(self) -> None:
        pass

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
