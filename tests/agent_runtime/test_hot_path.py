"""What the hot path's shortcuts must keep: incremental checks, deferred snapshots."""

from __future__ import annotations

import asyncio
import gc
import pickle
import threading
import weakref
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from agent_runtime import Runtime, ToolContext
from agent_runtime._trusted import trusted
from agent_runtime.abort import Aborted, AbortSignal
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.events import (
    AgentEnd,
    EventAdapter,
    MessageDelta,
    MessageUpdate,
)
from agent_runtime.llm._abortable import iterate_abortable
from agent_runtime.llm.types import ChatRequest, needed_capabilities
from agent_runtime.loop import AgentContext, LoopConfig, TranscriptState, validate_transcript
from agent_runtime.loop import run as loop_run
from agent_runtime.memory import MemoryPolicy
from agent_runtime.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agent_runtime.testing import FunctionModel, ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import tool
from tests.agent_runtime.transcript_strategies import (
    assistant,
    call,
    result,
    user,
    valid_transcripts,
)

pieces = st.sampled_from(
    [
        user(),
        assistant("a"),
        assistant("", call("c1")),
        assistant("", call("c2"), call("c3")),
        result("c1"),
        result("c2"),
        result("c3"),
        result("zz"),
    ]
)


@given(st.lists(pieces, max_size=12), st.lists(st.integers(0, 12), max_size=4))
def test_a_transcript_fed_in_pieces_says_what_validate_transcript_says(
    messages: list[Message], cuts: list[int]
) -> None:
    state = TranscriptState()
    start = 0
    for cut in [*sorted({min(c, len(messages)) for c in cuts}), len(messages)]:
        state.feed(messages[start:cut])
        assert state.violations() == validate_transcript(messages[:cut])
        start = cut
    assert state.count == len(messages)


@given(valid_transcripts())
def test_a_copy_goes_on_alone(messages: list[Message]) -> None:
    state = TranscriptState()
    state.feed(messages)
    copy = state.copy()
    copy.feed([result("orphan")])
    assert state.violations() == [] and copy.violations() != []


def test_the_state_knows_when_an_image_was_fed() -> None:
    state = TranscriptState()
    state.feed([user("hi")])
    assert not state.vision
    state.feed([UserMessage(content=[ImageContent(data="aGk=", mime_type="image/png")])])
    assert state.vision


def _message(text: str) -> AssistantMessage:
    return AssistantMessage(content=[TextContent(text=text)], stop_reason="stop")


DELTA = MessageDelta(kind="text", content_index=0, delta="o")


def test_a_deferred_update_makes_its_message_only_when_read_and_one_for_all() -> None:
    calls: list[int] = []

    def snapshot() -> AssistantMessage:
        calls.append(1)
        return _message("hello")

    event = MessageUpdate.deferred(snapshot, DELTA, run_id="r", seq=4)
    assert calls == [] and event.delta == DELTA and event.seq == 4
    seen: list[AssistantMessage] = []
    readers = [threading.Thread(target=lambda: seen.append(event.message)) for _ in range(8)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(5)
    assert 1 <= len(calls) <= 8 and len({id(m) for m in seen}) == 1 and seen[0].text == "hello"
    assert pickle.loads(pickle.dumps(event)) == event


def test_a_deferred_update_is_an_ordinary_event_to_json_and_equality() -> None:
    message = _message("hel")
    event = MessageUpdate.deferred(lambda: message, DELTA, run_id="r", seq=2)
    plain = MessageUpdate(message=message, delta=DELTA, run_id="r", seq=2, ts=event.ts)
    assert event.model_dump_json() == plain.model_dump_json()
    assert EventAdapter.validate_json(event.model_dump_json()) == event == plain
    assert event.model_copy(update={"seq": 3}).message.text == "hel"
    assert "hel" in repr(MessageUpdate.deferred(lambda: _message("hel"), DELTA))


# -- aborting a stream without a reader task ----------------------------------------------------


async def _hanging(closed: list[str], swallow: bool = False) -> AsyncIterator[str]:
    try:
        yield "first"
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            if not swallow:
                raise
        yield "late"
    finally:
        closed.append("closed")


def test_an_abort_reaches_a_read_made_in_another_task() -> None:
    async def go() -> None:
        signal, closed = AbortSignal(), list[str]()
        stream = iterate_abortable(_hanging(closed), signal)
        assert await anext(stream) == "first"
        pending = asyncio.ensure_future(asyncio.wait_for(anext(stream), 5))
        await asyncio.sleep(0.01)
        signal.abort("stop")
        with pytest.raises(Aborted):
            await pending
        await asyncio.sleep(0)  # the main task was not the one cancelled
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]

    asyncio.run(go())


def test_an_abort_while_the_consumer_is_busy_closes_the_source_at_once() -> None:
    async def go() -> None:
        signal, closed = AbortSignal(), list[str]()
        stream = iterate_abortable(_hanging(closed), signal)
        assert await anext(stream) == "first"
        signal.abort("stop")  # the consumer holds the item: no read is waiting
        for _ in range(20):
            await asyncio.sleep(0)
        assert closed == ["closed"]
        with pytest.raises(Aborted):
            await anext(stream)

    asyncio.run(go())


def test_a_source_that_swallows_the_cancellation_still_ends_in_aborted() -> None:
    async def go() -> None:
        signal, closed = AbortSignal(), list[str]()
        stream = iterate_abortable(_hanging(closed, swallow=True), signal)
        assert await anext(stream) == "first"
        asyncio.get_running_loop().call_later(0.01, signal.abort, "stop")
        with pytest.raises(Aborted):
            await anext(stream)
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]

    asyncio.run(go())


# -- what the loop still checks ----------------------------------------------------------------


def test_prompts_given_as_data_are_validated_as_they_enter_a_run() -> None:
    async def go() -> list[Any]:
        config = LoopConfig(ScriptedModel(["ok"]))
        prompt: Any = {"role": "user", "content": "hi"}
        return [e async for e in loop_run([prompt], AgentContext(), config)]

    events = asyncio.run(go())
    assert isinstance(events[-1], AgentEnd) and isinstance(events[-1].new_messages[0], UserMessage)
    with pytest.raises(ValueError):
        loop_run([{"role": "nobody"}], AgentContext(), LoopConfig(ScriptedModel()))  # type: ignore[list-item]


def _history_during_a_run(context: AgentContext, change: Any) -> list[list[str]]:
    """The texts of each request of a tool run whose owner calls `change(context.messages)`
    while the run's first model call is answered."""

    def answer(request: ChatRequest) -> Any:
        if len(requests) == 0:
            change(context.messages)
            requests.append([m.text for m in request.messages])
            return ScriptedTurn(tool_calls=[ToolCall(id="c1", name="echo", arguments={})])
        requests.append([m.text for m in request.messages])
        return "done"

    requests: list[list[str]] = []

    @tool
    def echo() -> str:
        """Echo."""
        return "echoed"

    async def go() -> None:
        config = LoopConfig(FunctionModel(answer))
        context.tools = [echo]
        async for _ in loop_run([user("now")], context, config):
            pass

    asyncio.run(go())
    return requests


def test_a_run_copies_the_context_history_it_starts_from() -> None:
    context = AgentContext(messages=[user("old")])
    requests = _history_during_a_run(context, lambda messages: messages.clear())
    assert requests == [["old", "now"], ["old", "now", "", "echoed"]]


def test_a_vision_mark_holds_for_its_own_messages_only() -> None:
    request = ChatRequest(messages=[user("hi")])
    request.mark_vision(False)
    assert request == ChatRequest(messages=request.messages)
    image = UserMessage(content=[ImageContent(data="aGk=", mime_type="image/png")])
    copy = request.model_copy(update={"messages": [*request.messages, image]})
    assert "vision" in needed_capabilities(copy) and "vision" not in needed_capabilities(request)


@given(
    kind=st.sampled_from(["text", "thinking", "tool_call"]),
    index=st.integers(min_value=0, max_value=10_000),
    text=st.text(),
)
def test_a_delta_made_without_validation_is_the_validated_one(
    kind: Any, index: int, text: str
) -> None:
    fast = MessageDelta.of(kind, index, text)
    slow = MessageDelta(kind=kind, content_index=index, delta=text)
    assert fast == slow
    assert fast.model_dump_json() == slow.model_dump_json()
    assert fast.model_fields_set == slow.model_fields_set
    assert MessageDelta.model_validate_json(fast.model_dump_json()) == slow
    with pytest.raises(ValidationError):
        fast.delta = "changed"  # type: ignore[misc]  # frozen, like any event part


def test_a_trusted_model_serialises_in_field_order_and_names_a_missing_field() -> None:
    messages: list[Message] = [UserMessage(content="hi")]
    fields: dict[str, Any] = {
        "reasoning": None,
        "messages": messages,
        "system": "s",
        "tools": [],
        "tool_choice": None,
        "temperature": None,
        "max_output_tokens": None,
        "response_schema": None,
    }
    made = trusted(ChatRequest, fields)
    validated = ChatRequest(messages=messages, system="s")
    assert made == validated
    assert made.model_dump_json() == validated.model_dump_json()
    del fields["system"]
    with pytest.raises(KeyError, match="system"):
        trusted(ChatRequest, fields)


MESSAGES: list[Message] = [
    UserMessage(content="hi"),
    AssistantMessage(content=[TextContent(text="hello")], stop_reason="stop"),
]
RESULT = ToolResultMessage(tool_call_id="c1", tool_name="t", content=[TextContent(text="r")])


def test_a_bad_agent_key_in_the_loop_config_fails_the_first_event_as_before() -> None:
    config = LoopConfig(model=ScriptedModel([ScriptedTurn(text="hi")]), agent=("", "r", 0))

    events = loop_run([UserMessage(content="go")], AgentContext(), config)  # made, not run

    async def first() -> None:
        await anext(events)

    with pytest.raises(ValueError, match="session ''"):
        asyncio.run(first())


def test_a_tool_runs_objects_are_freed_at_its_end_without_the_garbage_collector() -> None:
    # A tool call's context (and with it the run, its trace and its signal) must not sit in
    # a reference cycle: a long-running server would leave each tool run to the collector.
    contexts: list[weakref.ref[ToolContext]] = []

    @tool
    def probe(ctx: ToolContext) -> str:
        """Remember the call's context."""
        contexts.append(weakref.ref(ctx))
        return "ok"

    call = ToolCall(id="c1", name="probe", arguments={})
    model = ScriptedModel([ScriptedTurn(tool_calls=[call]), "done"])
    with Runtime.start(RuntimeConfig(memory=MemoryConfig(store="memory"))) as rt:
        agent = rt.start_agent(
            ("gc", "a", 0), model=model, tools=[probe], memory=MemoryPolicy.none()
        )
        gc.collect()
        gc.disable()
        try:
            agent.run("go", timeout=10)
            agent.wait_for_idle(timeout=10)
            wait_until(lambda: contexts[0]() is None, timeout=5, what="the context was freed")
        finally:
            gc.enable()


def test_an_idle_agent_keeps_nothing_of_a_closed_subscription() -> None:
    # The actor's last message was the subscription's `unsubscribe`: an idle actor holding it
    # kept the subscription, its buffer and its last run's events alive for as long as the
    # agent lived (~40 objects of each of a server's idle agents, all for the collector).
    with Runtime.start(RuntimeConfig(memory=MemoryConfig(store="memory"))) as rt:
        agent = rt.start_agent(
            ("idle", "a", 0), model=ScriptedModel(["done"]), memory=MemoryPolicy.none()
        )
        sub = agent.subscribe()
        agent.prompt("go")
        kinds = [event.type for event in sub.until_end(timeout=10)]
        assert kinds[-1] == "agent_end"
        sub.close()  # tells the actor `unsubscribe`: its last message
        freed = weakref.ref(sub)
        del sub
        wait_collected(freed, "the closed subscription was freed")


def test_an_idle_agent_keeps_no_task_of_its_last_run() -> None:
    # The agent waits for its previous run's driver before the next starts; once that
    # driver is done there is nothing to wait for, and an idle agent must not keep its task.
    drivers: list[weakref.ref[asyncio.Task[Any]]] = []

    async def answer(request: ChatRequest) -> str:
        task = asyncio.current_task()  # the model is read by the run's driver task itself
        assert task is not None
        drivers.append(weakref.ref(task))
        return "done"

    with Runtime.start(RuntimeConfig(memory=MemoryConfig(store="memory"))) as rt:
        agent = rt.start_agent(
            ("idle", "t", 0), model=FunctionModel(answer), memory=MemoryPolicy.none()
        )
        assert agent.run("go", timeout=10).text == "done"
        wait_collected(drivers[0], "the finished driver task was freed")
        assert agent.run("again", timeout=10).text == "done"  # and the next run starts


def wait_collected(ref: weakref.ref[Any], what: str) -> None:
    """Wait until `ref`'s object is gone, collecting cycles on each look."""

    def collected() -> bool:
        gc.collect()
        return ref() is None

    wait_until(collected, timeout=5, what=what)


def test_a_buffered_token_leaves_few_objects_for_the_garbage_collector() -> None:
    # A subscriber's thread reads only when it gets the GIL: meanwhile each token's event
    # waits in its buffer, survives collections and pushes the collector towards full
    # collections (which halved the streaming rate at ten tracked objects per token).
    deltas = 500
    model = ScriptedModel([ScriptedTurn(chunks=["a"] * deltas)])
    with Runtime.start(RuntimeConfig(memory=MemoryConfig(store="memory"))) as rt:
        agent = rt.start_agent(("gc", "s", 0), model=model, memory=MemoryPolicy.none())
        sub = agent.subscribe(max_queue=deltas + 100)
        gc.collect()
        gc.disable()
        try:
            before = len(gc.get_objects())
            agent.prompt("go")
            agent.wait_for_idle(timeout=10)
            per_token = (len(gc.get_objects()) - before) / deltas
        finally:
            gc.enable()
        updates = [e for e in sub.until_end(timeout=10) if isinstance(e, MessageUpdate)]
    assert len(updates) == deltas and updates[-1].message.text == "a" * deltas
    assert per_token <= 6, f"{per_token:.1f} tracked objects per buffered token"


def test_an_idle_agent_leaves_few_objects_for_the_garbage_collector() -> None:
    # Each full collection walks every idle agent: 100,000 of them spent ~10 s of their start
    # in the collector at 36 tracked objects each (a monitor and its callback per watcher of
    # the agent's exit, an "initialized" event and a "no result" marker per actor).
    agents = 200
    model = ScriptedModel()
    policy = MemoryPolicy.none()
    with Runtime.start(RuntimeConfig(memory=MemoryConfig(store="memory"))) as rt:
        rt.start_agent(("gc", "warm", 0), model=model, memory=policy)
        gc.collect()
        before = len(gc.get_objects())
        started = [
            rt.start_agent(("gc", "i", i), model=model, memory=policy) for i in range(agents)
        ]
        gc.collect()
        per_agent = (len(gc.get_objects()) - before) / agents
        assert not any(a.state().is_running for a in started)
    assert per_agent <= 30, f"{per_agent:.1f} tracked objects per idle agent"


def test_a_run_in_flight_leaves_few_objects_for_the_garbage_collector() -> None:
    # A burst's runs all wait on their model at once: what each holds meanwhile is traversed
    # by every collection and decides how soon a full one comes (153 objects per run with a
    # concurrent future for each driver task; 132 with `spawn`).
    runs = 50
    models = [ScriptedModel([ScriptedTurn(text="ok", delay=30)]) for _ in range(runs)]
    config = RuntimeConfig(memory=MemoryConfig(store="memory"))
    with Runtime.start(config) as rt:
        agents = [
            rt.start_agent(("gc", "r", i), model=m, memory=MemoryPolicy.none())
            for i, m in enumerate(models)
        ]
        gc.collect()
        before = len(gc.get_objects())
        for agent in agents:
            agent.prompt("go")
        wait_until(lambda: all(m.call_count == 1 for m in models), what="every run at its model")
        gc.collect()
        per_run = (len(gc.get_objects()) - before) / runs
        for agent in agents:
            agent.abort()
        for agent in agents:
            agent.wait_for_idle(timeout=10)
    assert per_run <= 140, f"{per_run:.1f} tracked objects per run in flight"


def test_per_token_events_keep_their_own_fields_set_when_copied_or_read() -> None:
    first = MessageUpdate.deferred(lambda: _message("h"), MessageDelta.of("text", 0, "h"))
    second = MessageUpdate.deferred(lambda: _message("he"), MessageDelta.of("text", 0, "e"))
    assert first.message.text == "h"
    # Like a validated update, read or not (a required field: always set to its readers).
    assert "message" in first.model_fields_set and "message" in second.model_fields_set
    copied = second.delta.model_copy(update={"delta": "x"})
    assert copied.delta == "x" and second.delta.delta == "e"
    assert second.model_copy(update={"seq": 9}).seq == 9 and second.seq == 0
    assert second.model_fields_set == {"agent", "run_id", "seq", "ts", "delta", "message"}
    assert second.model_dump(exclude_unset=True)["message"]["content"][0]["text"] == "he"
    assert first.delta.model_fields_set == {"kind", "content_index", "delta"}
