"""One tool batch of a run: groups, concurrency, steering boundaries, abort grace, pairing."""

from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from agent_runtime.abort import AbortSignal
from agent_runtime.events import (
    CustomEvent,
    Event,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
)
from agent_runtime.guardrails._runner import GuardrailRunner, Trip, result_text, tool_call_text
from agent_runtime.loop._approval import ApprovalNote, Screen, call_task, stamped
from agent_runtime.loop.types import LoopConfig, Stamp
from agent_runtime.messages import Content, Message, TextContent, ToolCall, ToolResult
from agent_runtime.tools import Tool, ToolContext, error_result, find_tool


@dataclass
class BatchOutcome:
    """What a tool batch produced: one result per call in call order, plus what stopped it."""

    results: list[tuple[ToolCall, ToolResult]] = field(default_factory=list)
    steering: list[Message] = field(default_factory=list)
    aborted: str | None = None
    tripped: str | None = None  # the reason a guardrail blocked a tool result


def plan_groups(
    calls: Sequence[ToolCall], tools: Sequence[Tool], limit: int
) -> list[list[ToolCall]]:
    """Split calls into groups run one after another: contiguous `parallel_safe` calls share
    a group of at most `limit`; any other call (or an unknown tool) is a group of its own."""
    groups: list[list[ToolCall]] = []
    current: list[ToolCall] = []
    for call in calls:
        tool = find_tool(tools, call.name)
        if tool is not None and tool.parallel_safe:
            if len(current) >= limit:
                groups.append(current)
                current = []
            current.append(call)
            continue
        if current:
            groups.append(current)
            current = []
        groups.append([call])
    if current:
        groups.append(current)
    return groups


def skipped_result(call: ToolCall) -> ToolResult:
    """The result of a call skipped because a steering message arrived first."""
    return error_result(
        f"Skipped {call.name}: the user sent a new message before this call ran.",
        outcome="skipped",
    )


def not_started_result(call: ToolCall, reason: str) -> ToolResult:
    """The result of a call that never started because the run was aborted."""
    return error_result(
        f"Not run: {call.name} was cancelled before it started ({reason}).",
        outcome="not_started",
        cancelled=True,
    )


def blocked_call_result(call: ToolCall, trip: Trip) -> ToolResult:
    """The result of a call a `tool_call` guardrail blocked: not run, and the model is told
    why, so it can do something else."""
    return error_result(
        f"Blocked: {call.name} was not run because the guardrail {trip.guardrail} refused the "
        f"call: {trip.explanation}",
        outcome="blocked",
        guardrail=trip.guardrail,
    )


async def blocked_by(guards: GuardrailRunner, call: ToolCall) -> ToolResult | None:
    """The result of `call` if one of `guards`' `tool_call` guardrails blocks it, else None."""
    trip = await guards.check(
        "tool_call",
        tool_call_text(call.name, call.arguments),
        tool_name=call.name,
        arguments=call.arguments,
    )
    return None if trip is None else blocked_call_result(call, trip)


def withheld_result(call: ToolCall, trip: Trip) -> ToolResult:
    """What stands in for a result a `tool_result` guardrail blocked (the run then fails):
    the call keeps its one result, and the blocked content never reaches the transcript."""
    return error_result(
        f"Withheld: the result of {call.name} was blocked by the guardrail {trip.guardrail}: "
        f"{trip.explanation}",
        outcome="blocked",
        guardrail=trip.guardrail,
    )


def guardrail_stopped_result(call: ToolCall) -> ToolResult:
    """The result of a call not run because a guardrail blocked an earlier result."""
    return error_result(
        f"Not run: {call.name} was not started because a guardrail stopped the run.",
        outcome="not_started",
    )


def abandoned_result(call: ToolCall, reason: str, partial: ToolResult | None) -> ToolResult:
    """The result of a call still running when the abort grace ran out."""
    text = (
        f"Cancelled: {call.name} was still running when the run was aborted ({reason}); "
        "its outcome is unknown."
    )
    content: list[Content] = [TextContent(text=text)]
    if partial is not None:
        content.extend(partial.content)
    return ToolResult(
        content=content,
        is_error=True,
        details={
            "outcome": "unknown",
            "cancelled": True,
            "partial": partial.model_dump(mode="json") if partial is not None else None,
        },
    )


class ToolBatch:
    """Runs the tool calls of one assistant message, yielding execution events.

    Groups run in order (`plan_groups`); before each group after the first, steering is
    polled: if a message arrived, the remaining calls are skipped (already started ones have
    finished). On abort, running calls get `abort_grace` to finish, then are abandoned;
    unstarted calls are not run. Every call gets exactly one result, in call order, and every
    result is announced by one `ToolExecutionEnd` before the batch ends: a call that never
    started (skipped, not started, blocked by a `tool_call` guardrail) gets its end without a
    `ToolExecutionStart`. A result a blocking `tool_result` guardrail fails is withheld
    (`withheld_result`), the later groups are not run, and `outcome.tripped` says why.
    """

    def __init__(
        self,
        calls: Sequence[ToolCall],
        tools: Sequence[Tool],
        config: LoopConfig,
        signal: AbortSignal,
        stamp: Stamp,
        take_steering: Callable[[], list[Message]],
        *,
        task_context: Callable[[str], contextvars.Context] | None = None,
        guards: GuardrailRunner | None = None,
    ) -> None:
        self.calls = list(calls)
        self.tools = list(tools)
        self.config = config
        self.signal = signal
        self.stamp = stamp
        self.take_steering = take_steering
        self._task_context = task_context
        self._guards = guards
        self.outcome = BatchOutcome()
        self._done: dict[str, ToolResult] = {}
        self._contexts: dict[str, ToolContext] = {}
        # Progress updates and emitted events of running calls, in the order they came.
        self._updates: collections.deque[
            tuple[ToolCall, ToolResult | CustomEvent | ApprovalNote]
        ] = collections.deque()
        self._wake = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._tasks: dict[asyncio.Task[ToolResult], ToolCall] = {}

    def _poke(self) -> None:
        self._loop.call_soon_threadsafe(self._wake.set)

    def _queuer(self, call: ToolCall) -> Callable[[ToolResult | CustomEvent | ApprovalNote], None]:
        """A call's `on_update` and `on_emit`: its progress updates and emitted events join
        the queue in the order they come (deque.append is thread-safe), and wake the batch.

        It holds the queue and the wake-up, not the batch: the batch holds the contexts, and
        a cycle through it would leave every tool run's objects (the run, its trace, its
        signal) to the garbage collector instead of freeing them at the run's end."""
        updates, loop, wake = self._updates, self._loop, self._wake

        def put(item: ToolResult | CustomEvent | ApprovalNote) -> None:
            updates.append((call, item))
            loop.call_soon_threadsafe(wake.set)

        return put

    async def run(self) -> AsyncGenerator[Event, None]:
        """Yield the batch's execution events; `outcome` holds the results afterwards."""
        remove = self.signal.on_abort(lambda _: self._poke())
        try:
            groups = plan_groups(self.calls, self.tools, self.config.max_tool_concurrency)
            for number, group in enumerate(groups):
                if self.signal.aborted:
                    break
                if number:
                    steering = self.take_steering()
                    if steering:
                        self.outcome.steering = steering
                        break
                group_events = self._run_group(group)
                async with aclosing(group_events):
                    async for event in group_events:
                        yield event
                if self.outcome.aborted is not None or self.outcome.tripped is not None:
                    break
        finally:
            remove()
            # Only left running when the generator is closed mid-group (aclose): cancel them
            # and close their contexts, so no update outlives the batch.
            for task, call in self._tasks.items():
                task.cancel()
                self._contexts[call.id].close()
            self._tasks.clear()
        if self.signal.aborted and self.outcome.aborted is None:
            self.outcome.aborted = str(self.signal.reason)
        for call in self.calls:
            result = self._done.get(call.id)
            if result is None:  # never started: announced here, as every result is
                if self.outcome.aborted is not None:
                    result = not_started_result(call, self.outcome.aborted)
                elif self.outcome.tripped is not None:
                    result = guardrail_stopped_result(call)
                else:
                    result = skipped_result(call)
                yield self._end_event(call, result)
            self.outcome.results.append((call, result))

    async def _run_group(self, group: list[ToolCall]) -> AsyncGenerator[Event, None]:
        guards = self._guards
        screen: Screen | None = None
        if guards is not None and guards.watches("tool_call"):
            # Not a method: the screen goes into the calls' tasks, and no task holds the batch.
            screen = functools.partial(blocked_by, guards)
        for call in group:
            if screen is not None:
                blocked = await screen(call)
                if blocked is not None:  # not run; the model reads why
                    self._done[call.id] = blocked
                    yield self._end_event(call, blocked)
                    continue
            yield self.stamp(
                ToolExecutionStart, tool_call_id=call.id, name=call.name, args=call.arguments
            )
            queue = self._queuer(call)
            ctx = ToolContext(
                tool_call_id=call.id,
                tool_name=call.name,
                agent_key=self.config.agent,
                signal=self.signal,
                runtime=self.config.runtime,
                on_update=queue,
                spawner=self.config.spawner,
                on_emit=queue,
            )
            self._contexts[call.id] = ctx
            coro = call_task(call, self.tools, ctx, self.config, queue, screen)
            # The tool runs with its own span current, so work it starts (a delegated
            # subagent's run) links back to it.
            run_in = self._task_context(call.id) if self._task_context is not None else None
            self._tasks[self._loop.create_task(coro, context=run_in)] = call
        deadline: float | None = None
        while self._tasks:
            if self.signal.aborted and deadline is None:
                deadline = time.monotonic() + self.config.abort_grace
            timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            waiter = asyncio.ensure_future(self._wake.wait())
            waitables: set[asyncio.Future[Any]] = {waiter, *self._tasks}
            done, _ = await asyncio.wait(
                waitables, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if not waiter.done():
                waiter.cancel()
            self._wake.clear()
            for event in self._drain_updates():
                yield event
            for task in [t for t in done if t in self._tasks]:
                call = self._tasks.pop(task)
                result = task.result()
                if guards is not None and guards.watches("tool_result"):
                    trip = await guards.check(
                        "tool_result",
                        result_text(result),
                        tool_name=call.name,
                        arguments=call.arguments,
                    )
                    if trip is not None:
                        result = withheld_result(call, trip)
                        if self.outcome.tripped is None:
                            self.outcome.tripped = trip.reason
                self._done[call.id] = result
                yield self._end_event(call, result)
            if deadline is not None and time.monotonic() >= deadline and self._tasks:
                reason = str(self.signal.reason)
                for task, call in list(self._tasks.items()):
                    task.cancel()
                    ctx = self._contexts[call.id]
                    ctx.close()  # from here its updates are dropped and last_partial is fixed
                    result = abandoned_result(call, reason, ctx.last_partial)
                    self._done[call.id] = result
                    yield self._end_event(call, result)
                self._tasks.clear()
        if self.signal.aborted:
            self.outcome.aborted = str(self.signal.reason)

    def _drain_updates(self) -> list[Event]:
        events: list[Event] = []
        while self._updates:
            call, partial = self._updates.popleft()
            if call.id in self._done:
                continue  # an update racing the end is dropped: the end says more
            if isinstance(partial, ApprovalNote):
                events.append(stamped(partial, self.stamp))
                continue
            if isinstance(partial, CustomEvent):
                events.append(self.stamp(CustomEvent, name=partial.name, data=partial.data))
                continue
            events.append(
                self.stamp(
                    ToolExecutionUpdate,
                    tool_call_id=call.id,
                    name=call.name,
                    args=call.arguments,
                    partial=partial,
                )
            )
        return events

    def _end_event(self, call: ToolCall, result: ToolResult) -> Event:
        return self.stamp(
            ToolExecutionEnd,
            tool_call_id=call.id,
            name=call.name,
            result=result,
            is_error=result.is_error,
        )
