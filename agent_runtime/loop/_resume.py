"""A turn that was parked waiting for approvals, resumed by a later run before its first
model call (an agent that restarted, or a new process on the same session memory)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from agent_runtime.events import Error, Event, ToolExecutionEnd, TurnEnd
from agent_runtime.loop._approval import edited_args, with_edited_args
from agent_runtime.loop._batch import ToolBatch
from agent_runtime.messages import (
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    ToolResult,
    ToolResultMessage,
)


@dataclass(frozen=True, slots=True)
class ResumedTurn:
    """What a parked turn left: the user messages that led to its answer (`lead`, not yet in
    session memory), the answer, the calls that had started and the results of those that
    ended. The decisions come from the run's `Approver` (`decided`)."""

    lead: tuple[Message, ...]
    message: AssistantMessage
    started: frozenset[str]
    results: Mapping[str, ToolResult]


@dataclass
class ResumeOutcome:
    """Set by `resumed_turn`: the run ended there (aborted, or a guardrail tripped)."""

    ended: bool = False


def unknown_outcome(call: ToolCall) -> ToolResult:
    """A call that was running when its process went away: nobody knows what it did."""
    return ToolResult(
        content=[
            TextContent(
                text=f"Not completed: {call.name} was running when the agent stopped; "
                "its outcome is unknown."
            )
        ],
        is_error=True,
        details={"outcome": "unknown", "cancelled": True},
    )


async def resumed_turn(run: Any, turn: ResumedTurn, outcome: ResumeOutcome) -> AsyncIterator[Event]:
    """Commit the parked turn's lead and answer, run its calls that are still to run (the
    decided ones: approved run, denied get their error; those that never started run as
    usual), pair the ones that were running with an `outcome="unknown"` result, and commit
    every result in call order, ending the turn. `run` is the loop's `_Run`."""
    approver = run.config.approvals
    answer = turn.message  # with the arguments humans edited on approval, as it is kept
    for call in answer.tool_calls:
        decision = approver.decided(call.id) if approver is not None else None
        if decision is not None and decision.approved and decision.args is not None:
            answer = with_edited_args(answer, call.id, decision.args)
    for message in (*turn.lead, answer):
        for event in run.commit(message):
            yield event
    calls = turn.message.tool_calls
    fixed: dict[str, ToolResult] = {}
    for call in calls:
        known = turn.results.get(call.id)
        if known is not None:
            fixed[call.id] = known
        elif call.id in turn.started and (approver is None or approver.decided(call.id) is None):
            fixed[call.id] = unknown_outcome(call)
            yield run.stamp(
                ToolExecutionEnd,
                tool_call_id=call.id,
                name=call.name,
                result=fixed[call.id],
                is_error=True,
            )
    todo = [call for call in calls if call.id not in fixed]
    batch = ToolBatch(
        todo,
        run.tools,
        run.config,
        run.signal,
        run.stamp,
        list,  # steering is taken after the turn, as after any other
        task_context=run.trace.tool_context,
        guards=run.guards,
    )
    batch_events = batch.run()
    async with aclosing(batch_events):
        async for event in batch_events:
            if (edit := edited_args(event)) is not None:
                answer = run.amend(answer, *edit)
            yield event
    ran = {call.id: result for call, result in batch.outcome.results}
    results: list[ToolResultMessage] = []
    for call in calls:
        result = fixed.get(call.id) or ran[call.id]
        message = ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=result.content,
            details=result.details,
            is_error=result.is_error,
            trust=result.trust,
        )
        results.append(message)
        for event in run.commit(message):
            yield event
    yield run.stamp(TurnEnd, message=answer, tool_results=results)
    run.tool_turns += 1
    if batch.outcome.tripped is not None:
        outcome.ended = True
        yield run.stamp(Error, reason=batch.outcome.tripped)
    elif batch.outcome.aborted is not None:
        outcome.ended = True
        yield run.canceled(batch.outcome.aborted)
