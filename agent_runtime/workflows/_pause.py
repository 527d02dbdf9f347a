"""PauseGate: the pauses of one step attempt, replaying answers already given, and telling
the step's timeout clock when the step is paused."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from pydantic import JsonValue

from agent_runtime.workflows._errors import WorkflowError

WaitForAnswer = Callable[[str], Awaitable[JsonValue]]
"""Commits the workflow as paused with a reason, then waits for `resume_with`'s value."""


class PauseGate:
    """The `ctx.pause` calls of one attempt, counted in order.

    The n-th pause of an attempt returns the n-th answer the step already got (from a run
    of it that a restart or a retry interrupted) at once, without pausing; past those it
    waits for a new answer through `wait_for_answer`. All on the event loop's thread.
    """

    def __init__(self, answers: tuple[JsonValue, ...], wait_for_answer: WaitForAnswer) -> None:
        self._answers = answers
        self._wait_for_answer = wait_for_answer
        self._next = 0
        self.paused = False
        self._watchers: list[asyncio.Future[None]] = []

    async def pause(self, reason: str) -> JsonValue:
        """The answer to this pause (see the class).

        Raises:
            TypeError: `reason` is not a str.
            WorkflowError: the step is paused already (two tasks of one step paused at once).
        """
        if not isinstance(reason, str):
            raise TypeError(f"ctx.pause needs a reason (a str), not {type(reason).__name__}")
        index = self._next
        self._next += 1
        if index < len(self._answers):
            return self._answers[index]
        if self.paused:
            raise WorkflowError("ctx.pause called while the step is already paused")
        self._set_paused(True)
        try:
            return await self._wait_for_answer(reason)
        finally:
            self._set_paused(False)

    def changed(self) -> asyncio.Future[None]:
        """A future done at the next change of `paused`."""
        watcher: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._watchers.append(watcher)
        return watcher

    def _set_paused(self, paused: bool) -> None:
        self.paused = paused
        watchers, self._watchers = self._watchers, []
        for watcher in watchers:
            if not watcher.done():
                watcher.set_result(None)
