"""TemplateSubscription: one reader's queue of the changes of prompt templates."""

from __future__ import annotations

from collections.abc import Callable

from agent_runtime.memory._bounded import BoundedSubscription
from agent_runtime.templates._models import TemplateVersion
from supervisors._log import get_logger

log = get_logger(__name__)


class TemplateSubscription(BoundedSubscription[TemplateVersion]):
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
        super().__init__(max_queue=max_queue, on_close=on_close)
        self.template_id = template_id

    def wants(self, change: TemplateVersion) -> bool:
        """True if `change` is one this subscription reports."""
        return self.template_id is None or self.template_id == change.template_id

    def _overflow_message(self) -> str:
        return f"template subscription overflowed: the reader fell {self.max_queue} changes behind"

    def _log_overflow(self) -> None:
        log.warning("templates.subscription.overflowed", max_queue=self.max_queue)

    def __enter__(self) -> TemplateSubscription:
        return self

    def __repr__(self) -> str:
        return (
            f"<TemplateSubscription template_id={self.template_id!r} "
            f"queued={len(self._queue)} closed={self._closed}>"
        )
