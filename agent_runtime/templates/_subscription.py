"""TemplateSubscription: one reader's queue of the changes of prompt templates."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterator
from types import TracebackType

import structlog

from agent_runtime._errors import StreamOverflow
from agent_runtime.templates._models import TemplateVersion

log = structlog.get_logger(__name__)


class TemplateSubscription:
    """The changes (`TemplateVersion`s) of one template, or of every template when
    `template_id` is None, in commit order, for one reader.

    Thread-safe. Writers never wait for the reader: when `max_queue` changes are waiting, the
    subscription is closed instead (an overflow) and the reader gets `StreamOverflow` after
    the changes already queued, so it never misses one silently. `close()` (or leaving the
    `with` block) unsubscribes and wakes a blocked reader.
    """

    def __init__(
        self,
        template_id: str | None,
        *,
        max_queue: int = 1000,
        on_close: Callable[[TemplateSubscription], None] | None = None,
    ) -> None:
        if isinstance(max_queue, bool) or not isinstance(max_queue, int) or max_queue < 1:
            raise ValueError(f"invalid max_queue {max_queue!r} (expected an int >= 1)")
        self.template_id = template_id
        self.max_queue = max_queue
        self._on_close = on_close
        self._cond = threading.Condition(threading.Lock())
        self._queue: collections.deque[TemplateVersion] = collections.deque()
        self._closed = False
        self._overflowed = False

    @property
    def closed(self) -> bool:
        """True once closed or overflowed (queued changes may remain to be read)."""
        return self._closed

    def wants(self, change: TemplateVersion) -> bool:
        """True if `change` is one this subscription reports."""
        return self.template_id is None or self.template_id == change.template_id

    def poll(self, timeout: float | None = None) -> TemplateVersion | None:
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
                        raise StreamOverflow(
                            "template subscription overflowed: the reader fell "
                            f"{self.max_queue} changes behind"
                        )
                    return None
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left)
            return self._queue.popleft()

    def __iter__(self) -> Iterator[TemplateVersion]:
        """Changes until the subscription is closed and drained."""
        while (change := self.poll()) is not None:
            yield change

    def offer(self, change: TemplateVersion) -> bool:
        """Queue `change` without waiting; False once closed. A full queue closes the
        subscription as an overflow."""
        with self._cond:
            if self._closed:
                return False
            if len(self._queue) < self.max_queue:
                self._queue.append(change)
                self._cond.notify()
                return True
            self._closed = self._overflowed = True
            self._cond.notify_all()
        log.warning("templates.subscription.overflowed", max_queue=self.max_queue)
        return False

    def close(self) -> None:
        """Unsubscribe; queued changes can still be read. Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        if self._on_close is not None:
            self._on_close(self)

    def __enter__(self) -> TemplateSubscription:
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
            f"<TemplateSubscription template_id={self.template_id!r} "
            f"queued={len(self._queue)} closed={self._closed}>"
        )
