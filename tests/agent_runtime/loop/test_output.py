"""The loop's typed output (`LoopConfig.output`): the events of a retried and of a failed
answer, and the transcript they leave (issue 16)."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from agent_runtime.events import AgentEnd, Error, Event
from agent_runtime.loop import (
    OUTPUT_TOOL,
    AgentContext,
    LoopConfig,
    OutputSpec,
    run,
    validate_transcript,
)
from agent_runtime.messages import AssistantMessage, UserMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn
from tests.agent_runtime.loop.helpers import call, committed, names


class Point(BaseModel):
    x: int
    y: int


def _events(model: ScriptedModel, retries: int) -> list[Event]:
    config = LoopConfig(model, output=OutputSpec.of(Point, retries))

    async def collect() -> list[Event]:
        return [e async for e in run([UserMessage(content="where?")], AgentContext(), config)]

    return asyncio.run(collect())


def test_an_invalid_answer_ends_its_turn_and_the_feedback_opens_the_next() -> None:
    events = _events(ScriptedModel(['{"x": 1}', '{"x": 1, "y": 2}']), retries=1)
    assert [n for n in names(events) if n != "MessageUpdate"] == [
        "AgentStart",
        "TurnStart",
        "MessageStart",  # the prompt
        "MessageEnd",
        "MessageStart",  # the invalid answer
        "MessageEnd",
        "TurnEnd",
        "TurnStart",
        "MessageStart",  # the feedback
        "MessageEnd",
        "MessageStart",  # the valid answer
        "MessageEnd",
        "TurnEnd",
        "AgentEnd",
    ]
    assert isinstance(events[-1], AgentEnd)
    feedback = committed(events)[2]
    assert isinstance(feedback, UserMessage) and "y: Field required" in feedback.text


def test_a_spent_retry_budget_ends_the_run_with_output_invalid() -> None:
    events = _events(ScriptedModel(['{"x": 1}', '{"x": 1}', '{"x": 1, "y": 2}']), retries=1)
    terminal = events[-1]
    assert isinstance(terminal, Error)
    assert terminal.reason.startswith("output_invalid: not a valid Point after 2 attempt(s)")
    assert isinstance(terminal.partial, AssistantMessage)
    assert terminal.partial.text == '{"x": 1}'


def test_a_failed_output_tool_call_still_gets_its_result() -> None:
    turn = ScriptedTurn(tool_calls=[call("o1", OUTPUT_TOOL, x=1)])
    events = _events(ScriptedModel([turn], capabilities=["tools", "streaming"]), retries=0)
    assert isinstance(events[-1], Error)
    transcript = committed(events)
    assert validate_transcript(transcript) == []
    assert transcript[-1].role == "tool_result"
