"""Invariants of the loop under any script of calls, flags, steering and abort points."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_runtime.events import (
    AgentEnd,
    Canceled,
    Error,
    Event,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from agent_runtime.loop import validate_transcript
from agent_runtime.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn
from agent_runtime.tools import ToolContext, tool
from tests.agent_runtime.loop.helpers import call, committed, drive


@tool(parallel_safe=True)
def fast(n: int) -> int:
    """Parallel-safe."""
    return n


@tool
def serial(n: int) -> int:
    """Sequential."""
    return n


@tool(parallel_safe=True)
def waits(n: int, ctx: ToolContext) -> int:
    """Stops when aborted."""
    ctx.update(str(n))
    ctx.signal.wait(0.05)
    return n


TOOLS = [fast, serial, waits]

turn_calls = st.lists(st.sampled_from(["fast", "serial", "waits"]), min_size=1, max_size=5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.lists(turn_calls, min_size=1, max_size=3),
    steer_after=st.sets(st.integers(0, 12), max_size=3),
    abort_at=st.none() | st.integers(0, 40),
    concurrency=st.integers(1, 4),
)
def test_every_call_gets_exactly_one_result_in_call_order(
    turns: list[list[str]], steer_after: set[int], abort_at: int | None, concurrency: int
) -> None:
    script = []
    counter = 0
    for names_ in turns:
        calls = []
        for name in names_:
            calls.append(call(f"c{counter}", name, n=counter))
            counter += 1
        script.append(ScriptedTurn(tool_calls=calls))
    script.extend(ScriptedTurn(text=f"answer {i}") for i in range(len(turns) + 10))
    polls = {"n": 0}
    given_out: list[str] = []
    handed_back: list[Message] = []

    def steering() -> list[Message]:
        polls["n"] += 1
        if polls["n"] not in steer_after:
            return []
        given_out.append(f"steer {polls['n']}")
        return [UserMessage(content=given_out[-1])]

    seen = {"n": 0}

    def abort_when(event: Event) -> bool:
        seen["n"] += 1
        return abort_at is not None and seen["n"] == abort_at

    events = drive(
        ScriptedModel(script),
        TOOLS,
        get_steering_messages=steering,
        abort_when=abort_when,
        abort_grace=0.5,
        max_tool_concurrency=concurrency,
        max_tool_turns=10,
        on_undelivered_steering=handed_back.extend,
    )
    assert isinstance(events[-1], AgentEnd | Canceled)
    assert not any(isinstance(e, AgentEnd | Canceled | Error) for e in events[:-1])
    transcript = committed(events)
    # Every steering message taken is delivered (committed) or handed back, exactly once.
    delivered = [
        m.text for m in transcript if isinstance(m, UserMessage) and m is not transcript[0]
    ]
    assert sorted(delivered + [m.text for m in handed_back]) == sorted(given_out)  # type: ignore[attr-defined]
    assert validate_transcript(transcript) == []
    for index, message in enumerate(transcript):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            ids = [c.id for c in message.tool_calls]
            following: list[Any] = []
            for later in transcript[index + 1 :]:
                if not isinstance(later, ToolResultMessage):
                    break
                following.append(later.tool_call_id)
            assert following == ids  # one result per call, in call order, right after it
    starts = [e.tool_call_id for e in events if isinstance(e, ToolExecutionStart)]
    ends = [e.tool_call_id for e in events if isinstance(e, ToolExecutionEnd)]
    results = [m.tool_call_id for m in transcript if isinstance(m, ToolResultMessage)]
    assert sorted(ends) == sorted(results)  # every result announced once, started or not
    assert set(starts) <= set(ends) and len(set(starts)) == len(starts)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
