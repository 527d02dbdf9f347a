"""Errors raised by the supervisors package."""

from __future__ import annotations


class SupervisorError(Exception):
    """Root of the errors raised by supervisors."""


class MaxChildrenReached(SupervisorError):
    """A DynamicSupervisor already runs its `max_children`."""

    def __init__(self, max_children: int) -> None:
        super().__init__(f"max_children={max_children} reached: no more children can be started")
        self.max_children = max_children


class ChildStartError(SupervisorError):
    """A child's start function raised or returned something that is not a live actor ref.

    Attributes:
        child_id: the id of the child that failed.
    """

    def __init__(self, child_id: str, cause: str) -> None:
        super().__init__(f"child {child_id!r} failed to start: {cause}")
        self.child_id = child_id
        self.cause = cause


class SupervisorStopped(SupervisorError):
    """The supervisor is no longer running."""


class EventLoopDied(SupervisorError):
    """The event-loop thread of an `AsyncTaskSupervisor` ended without being stopped.

    The future of every task that was still on that loop fails with it.

    Attributes:
        loop: the name of the loop.
        reason: why it ended.
    """

    def __init__(self, loop: str, reason: str) -> None:
        super().__init__(f"event loop {loop!r} died: {reason}")
        self.loop = loop
        self.reason = reason
