"""`run_into`: the loop handing its streamed tokens to a sink, for a consumer like the driver."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from agent_runtime.events import Event, MessageUpdate
from agent_runtime.loop import AgentContext, LoopConfig, run
from agent_runtime.loop._run import run_into
from agent_runtime.messages import AssistantMessage, ToolCall, UserMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn
from agent_runtime.tools import tool


@tool
def shout(text: str) -> str:
    """Shout the text."""
    return text.upper()


def _script() -> list[ScriptedTurn | str]:
    call = ToolCall(id="c1", name="shout", arguments={"text": "hi"})
    return [
        ScriptedTurn(chunks=["let ", "me ", "call"], tool_calls=[call]),
        ScriptedTurn(chunks=["HI", " it", " is"]),
    ]


class Sink:
    """An `UpdateSink` that hears while `listening` and calls `take` with each update."""

    def __init__(self, take: Callable[[MessageUpdate], Awaitable[None] | None]) -> None:
        self.take = take
        self.listening = True
        self.answers: list[Callable[[], AssistantMessage]] = []

    def heard(self) -> bool:
        return self.listening

    def update(self, event: MessageUpdate) -> Awaitable[None] | None:
        return self.take(event)

    def unheard(self, answer: Callable[[], AssistantMessage]) -> None:
        self.answers.append(answer)


def _context() -> AgentContext:
    return AgentContext(system_prompt="", messages=[], tools=[shout])


def _shape(event: Event) -> tuple[object, ...]:
    if isinstance(event, MessageUpdate):
        return ("update", event.seq, event.delta.kind, event.delta.delta, event.message.text)
    return (type(event).__name__, event.seq)


async def _yielded() -> list[Event]:
    config = LoopConfig(ScriptedModel(_script()), run_id="r1")
    return [event async for event in run([UserMessage(content="go")], _context(), config)]


async def _sunk() -> tuple[list[Event], list[Event]]:
    """Everything in arrival order (sunk and yielded interleaved), and what was yielded."""
    arrived: list[Event] = []
    yielded: list[Event] = []

    config = LoopConfig(ScriptedModel(_script()), run_id="r1")
    sink = Sink(arrived.append)  # type: ignore[arg-type]  # append returns None
    async for event in run_into([UserMessage(content="go")], _context(), config, None, sink):
        arrived.append(event)
        yielded.append(event)
    return arrived, yielded


def test_the_sink_gets_every_update_in_the_place_run_would_yield_it() -> None:
    expected = asyncio.run(_yielded())
    arrived, yielded = asyncio.run(_sunk())
    assert [_shape(e) for e in arrived] == [_shape(e) for e in expected]
    assert not any(isinstance(e, MessageUpdate) for e in yielded)
    kinds = [e.delta.kind for e in arrived if isinstance(e, MessageUpdate)]
    assert kinds == ["text"] * 3 + ["tool_call"] + ["text"] * 3


def test_an_awaitable_from_the_sink_holds_the_next_chunk_until_it_is_done() -> None:
    async def scenario() -> list[str]:
        seen: list[str] = []
        gate = asyncio.Event()

        async def held() -> None:
            seen.append("waiting")
            await gate.wait()
            seen.append("released")

        def take(update: MessageUpdate) -> Awaitable[None] | None:
            seen.append(update.delta.delta)
            return held() if update.delta.delta == "a" else None

        model = ScriptedModel([ScriptedTurn(chunks=["a", "b"])])
        config = LoopConfig(model)
        events = run_into([UserMessage(content="go")], _context(), config, None, Sink(take))
        consumer = asyncio.ensure_future(_drain(events))
        for _ in range(50):  # the run is parked on the awaitable: "b" is not read meanwhile
            await asyncio.sleep(0)
        assert seen == ["a", "waiting"]
        gate.set()
        await consumer
        return seen

    assert asyncio.run(scenario()) == ["a", "waiting", "released", "b"]


async def _drain(events: object) -> None:
    async for _ in events:  # type: ignore[attr-defined]
        pass


def test_continuing_checks_the_history_at_once() -> None:
    config = LoopConfig(ScriptedModel())
    empty = AgentContext(system_prompt="", messages=[], tools=[])
    with pytest.raises(ValueError, match="no messages"):
        run_into(None, empty, config, None, Sink(lambda update: None))


def test_tokens_nobody_hears_make_no_events_and_leave_the_growing_answer() -> None:
    async def scenario() -> tuple[list[Event], list[str], Sink]:
        sink = Sink(lambda update: None)
        sink.listening = False
        seen: list[str] = []
        model = ScriptedModel([ScriptedTurn(chunks=["a", "b", "c"], chunk_delay=0.001)])
        events = run_into([UserMessage(content="go")], _context(), LoopConfig(model), None, sink)
        yielded = []
        async for event in events:
            yielded.append(event)
            for answer in sink.answers:
                seen.append(answer().text)
        return yielded, seen, sink

    yielded, seen, sink = asyncio.run(scenario())
    assert [e.seq for e in yielded] == list(range(1, len(yielded) + 1))  # no seq was used
    assert not any(isinstance(e, MessageUpdate) for e in yielded)
    assert len(sink.answers) == 1  # once for the whole unheard stretch, not once per token
    assert seen[-1] == "abc"  # read after the answer's end: as far as it grew


def test_a_sink_that_starts_hearing_mid_answer_gets_updates_from_there_on() -> None:
    class LateSink(Sink):
        def unheard(self, answer: Callable[[], AssistantMessage]) -> None:
            super().unheard(answer)
            self.first = answer().text
            self.listening = True  # a subscriber came: the next token is heard

    async def scenario() -> tuple[list[Event], list[MessageUpdate], LateSink]:
        got: list[MessageUpdate] = []
        sink = LateSink(got.append)  # type: ignore[arg-type]  # append returns None
        sink.listening = False
        model = ScriptedModel([ScriptedTurn(chunks=["a", "b", "c"])])
        events = run_into([UserMessage(content="go")], _context(), LoopConfig(model), None, sink)
        return [event async for event in events], got, sink

    yielded, got, sink = asyncio.run(scenario())
    assert sink.first == "a" and len(sink.answers) == 1
    # each update's message: the answer so far
    assert [(u.delta.delta, u.message.text) for u in got] == [("b", "ab"), ("c", "abc")]
    seqs = sorted(e.seq for e in [*yielded, *got])
    assert seqs == list(range(1, len(seqs) + 1))  # the unheard token used no seq
