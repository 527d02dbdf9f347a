"""Every tool result, started or not, is announced by one ToolExecutionEnd before the next turn
or the run's terminal."""

from __future__ import annotations

import threading

from agent_runtime.abort import AbortSignal
from agent_runtime.events import (
    Canceled,
    Event,
    MessageEnd,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
    is_terminal,
)
from agent_runtime.messages import AssistantMessage, Message, UserMessage
from agent_runtime.testing import ScriptedModel
from agent_runtime.tools import ToolContext, tool
from tests.agent_runtime.loop.helpers import call, calls_turn, drive, results_of


def ends_before_the_next_turn(events: list[Event]) -> None:
    """Each batch's results (its TurnEnd) have one ToolExecutionEnd each, in the same turn,
    before its TurnEnd, with the same outcome."""
    ends: dict[str, ToolExecutionEnd] = {}
    for event in events:
        if isinstance(event, TurnStart) or is_terminal(event):
            assert not ends, f"ends left over at {type(event).__name__}: {list(ends)}"
        elif isinstance(event, ToolExecutionEnd):
            assert event.tool_call_id not in ends, f"two ends for {event.tool_call_id}"
            ends[event.tool_call_id] = event
        elif isinstance(event, TurnEnd):
            for result in event.tool_results:
                end = ends.pop(result.tool_call_id, None)
                assert end is not None, f"no ToolExecutionEnd for {result.tool_call_id}"
                assert end.is_error == result.is_error
                assert end.result.details == result.details
            assert not ends, f"ends without a result: {list(ends)}"


def test_calls_skipped_by_steering_are_announced_by_their_end() -> None:
    queue: list[Message] = []

    @tool
    def step(n: int) -> int:
        """Step."""
        queue.append(UserMessage(content="change of plan"))
        return n

    def steering() -> list[Message]:
        taken = list(queue)
        queue.clear()
        return taken

    model = ScriptedModel([calls_turn(*(call(f"c{i}", "step", n=i) for i in range(3))), "ok"])
    events = drive(model, [step], get_steering_messages=steering)

    assert [e.tool_call_id for e in events if isinstance(e, ToolExecutionStart)] == ["c0"]
    ends = [e for e in events if isinstance(e, ToolExecutionEnd)]
    assert [e.tool_call_id for e in ends] == ["c0", "c1", "c2"]
    assert [e.is_error for e in ends] == [False, True, True]
    assert [e.result.details["outcome"] for e in ends[1:]] == ["skipped", "skipped"]  # type: ignore[index]
    assert [r.tool_call_id for r in results_of(events)] == ["c0", "c1", "c2"]
    ends_before_the_next_turn(events)


def test_calls_not_started_before_an_abort_are_announced_before_canceled() -> None:
    started = threading.Event()

    @tool
    def first(ctx: ToolContext) -> str:
        """Runs until aborted."""
        started.set()
        ctx.signal.wait(10)
        return "stopped"

    @tool
    def never(text: str) -> str:
        """Never runs."""
        return text

    model = ScriptedModel([calls_turn(call("a", "first"), call("b", "never", text="x"))])
    events = drive(
        model,
        [first, never],
        signal=AbortSignal(),
        abort_when=lambda e: isinstance(e, ToolExecutionStart),
    )

    assert isinstance(events[-1], Canceled)
    assert [e.tool_call_id for e in events if isinstance(e, ToolExecutionStart)] == ["a"]
    ends = {e.tool_call_id: e for e in events if isinstance(e, ToolExecutionEnd)}
    assert set(ends) == {"a", "b"}
    assert ends["b"].is_error and ends["b"].result.details["outcome"] == "not_started"  # type: ignore[index]
    ends_before_the_next_turn(events)


def test_an_abort_before_the_first_group_announces_every_call() -> None:
    signal = AbortSignal()

    @tool
    def unused() -> str:
        """Never runs."""
        return "no"

    calls = [call("x", "unused"), call("y", "unused")]
    model = ScriptedModel([calls_turn(*calls)])

    def abort_at_the_answer(event: Event) -> bool:
        return isinstance(event, MessageEnd) and isinstance(event.message, AssistantMessage)

    events = drive(model, [unused], signal=signal, abort_when=abort_at_the_answer)

    assert isinstance(events[-1], Canceled)
    assert not [e for e in events if isinstance(e, ToolExecutionStart)]
    assert [e.tool_call_id for e in events if isinstance(e, ToolExecutionEnd)] == ["x", "y"]
    ends_before_the_next_turn(events)
