"""FunctionModel: a test double whose answers a Python function computes from the request
(issue 16, "Test doubles users expect")."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator

import pytest

from agent_runtime import RunFailed, Runtime
from agent_runtime.abort import Aborted, AbortSignal
from agent_runtime.events import MessageUpdate
from agent_runtime.llm import ChatModel, ChatRequest, ModelPricing, RateLimitError
from agent_runtime.loop import RetryPolicy
from agent_runtime.messages import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from agent_runtime.testing import FunctionModel, ScriptedTurn
from agent_runtime.tools import tool

REQUEST = ChatRequest(messages=[UserMessage(content="hi")])


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _last_user_text(request: ChatRequest) -> str:
    return next(m.text for m in reversed(request.messages) if isinstance(m, UserMessage))


def _texts(model: ChatModel, request: ChatRequest = REQUEST) -> list[str]:
    async def collect() -> list[str]:
        return [c.text async for c in model.stream(request) if c.type == "text"]

    return asyncio.run(collect())


# -- what the function returns ------------------------------------------------------------------


def test_a_sync_function_answers_from_the_request() -> None:
    model = FunctionModel(lambda request: f"you said {_last_user_text(request)}")
    assert isinstance(model, ChatModel)
    assert model.prompt_sync("ping") == "you said ping"


def test_an_async_function_answers_from_the_request() -> None:
    async def reply(request: ChatRequest) -> str:
        await asyncio.sleep(0)
        return _last_user_text(request).upper()

    assert FunctionModel(reply).prompt_sync("ping") == "PING"


def test_an_async_callable_object_is_awaited() -> None:
    class Replier:
        async def __call__(self, request: ChatRequest) -> str:
            return "from an object"

    assert FunctionModel(Replier()).prompt_sync("x") == "from an object"


def test_a_scripted_turn_streams_its_chunks_in_order() -> None:
    model = FunctionModel(lambda request: ScriptedTurn(chunks=["Hel", "lo", "!"]))
    assert _texts(model) == ["Hel", "lo", "!"]


def test_a_string_streams_as_one_chunk() -> None:
    assert _texts(FunctionModel(lambda request: "whole")) == ["whole"]


def test_an_assistant_message_gives_its_text_thinking_tool_calls_and_usage() -> None:
    call = ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2})
    message = AssistantMessage(
        content=[
            ThinkingContent(thinking="let me add", signature="sig"),
            TextContent(text="adding"),
            call,
        ],
        usage=Usage(input_tokens=7, output_tokens=3),
    )
    response = FunctionModel(lambda request: message).generate_sync(REQUEST)
    assert response.text == "adding"
    assert response.message.tool_calls == [call]
    assert response.stop_reason == "tool_use"  # derived: the message did not set one
    assert response.usage == Usage(input_tokens=7, output_tokens=3)
    thinking = [b for b in response.message.content if isinstance(b, ThinkingContent)]
    assert [(b.thinking, b.signature) for b in thinking] == [("let me add", "sig")]


def test_an_assistant_message_keeps_a_stop_reason_it_sets() -> None:
    message = AssistantMessage(content=[TextContent(text="cut")], stop_reason="length")
    assert FunctionModel(lambda request: message).generate_sync(REQUEST).stop_reason == "length"


def test_a_generator_function_streams_each_piece_it_yields() -> None:
    def pieces(request: ChatRequest) -> Iterator[str]:
        yield "one "
        yield ""
        yield "two"

    model = FunctionModel(pieces)
    assert _texts(model) == ["one ", "two"]
    response = model.generate_sync(REQUEST)
    assert (response.text, response.stop_reason) == ("one two", "stop")
    assert response.usage.output_tokens >= 1


def test_an_async_generator_streams_as_it_yields() -> None:
    go_on = asyncio.Event()

    async def pieces(request: ChatRequest) -> AsyncIterator[str]:
        yield "first"
        await go_on.wait()  # the test sees the first piece before the second exists
        yield "second"

    async def watch() -> list[str]:
        seen: list[str] = []
        async for chunk in FunctionModel(pieces).stream(REQUEST):
            if chunk.type == "text":
                seen.append(chunk.text)
                go_on.set()
        return seen

    assert asyncio.run(watch()) == ["first", "second"]


def test_a_generator_yielding_something_else_is_an_error_naming_its_type() -> None:
    def pieces(request: ChatRequest) -> Iterator[object]:
        yield "ok"
        yield b"bytes"

    with pytest.raises(TypeError, match=r"function pieces yielded bytes \(expected str pieces"):
        FunctionModel(pieces).prompt_sync("x")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("reply", "named"),
    [(None, "NoneType"), (42, "int"), ({"text": "hi"}, "dict"), (["a"], "list")],
)
def test_a_wrong_return_value_is_an_error_naming_its_type(reply: object, named: str) -> None:
    def answer(request: ChatRequest) -> object:
        return reply

    model = FunctionModel(answer)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=rf"function .*answer returned {named} \(expected a str"):
        model.prompt_sync("x")
    assert model.call_count == 1


def test_a_model_needs_a_callable() -> None:
    with pytest.raises(TypeError, match="FunctionModel needs a callable, not str"):
        FunctionModel("hello")  # type: ignore[arg-type]


def test_what_the_function_raises_is_the_model_s_error() -> None:
    def fail(request: ChatRequest) -> str:
        raise RateLimitError("slow down", provider="function")

    model = FunctionModel(fail)
    with pytest.raises(RateLimitError, match="slow down"):
        model.prompt_sync("x")
    assert model.call_count == 1 and len(model.requests) == 1


# -- records and info ---------------------------------------------------------------------------


def test_requests_are_recorded_in_call_order() -> None:
    model = FunctionModel(lambda request: "ok")
    model.prompt_sync("a")
    model.prompt_sync("b", system="sys")
    assert model.call_count == 2
    assert [_last_user_text(r) for r in model.requests] == ["a", "b"]
    assert model.requests[1].system == "sys"


def test_a_model_told_not_to_record_only_counts() -> None:
    model = FunctionModel(lambda request: "ok", record_requests=False)
    model.prompt_sync("a")
    assert model.call_count == 1 and model.requests == []


def test_info_names_the_function_unless_told_otherwise() -> None:
    def my_reply(request: ChatRequest) -> str:
        return "ok"

    info = FunctionModel(my_reply).info
    assert (info.provider, info.model) == ("function", "function:my_reply")
    assert "tools" in info.capabilities and "streaming" in info.capabilities
    pricing = ModelPricing(input=1.0, output=2.0)
    custom = FunctionModel(my_reply, model="m", provider="p", capabilities=[], pricing=pricing)
    assert (custom.info.provider, custom.info.model, custom.info.pricing) == ("p", "m", pricing)
    assert custom.info.capabilities == frozenset()


# -- on the event loop --------------------------------------------------------------------------


def test_a_blocking_sync_function_runs_off_the_event_loop() -> None:
    release = threading.Event()
    model = FunctionModel(lambda request: "late" if release.wait(10) else "timed out")

    async def both() -> tuple[str, str]:
        slow = asyncio.ensure_future(model.prompt("a"))
        # The loop goes on while the function blocks: this prompt of another model completes.
        other = await FunctionModel(lambda request: "quick").prompt("b")
        release.set()
        return other, await slow

    assert asyncio.run(both()) == ("quick", "late")


def test_an_abort_cancels_an_async_function() -> None:
    started = threading.Event()
    cancelled = threading.Event()

    async def hang(request: ChatRequest) -> str:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    model = FunctionModel(hang)
    signal = AbortSignal()

    async def run() -> None:
        task = asyncio.ensure_future(model.prompt("x", signal=signal))
        await asyncio.to_thread(started.wait, 10)
        signal.abort("test")
        await task

    with pytest.raises(Aborted):
        asyncio.run(run())
    assert cancelled.is_set()


# -- driving an agent ---------------------------------------------------------------------------


def test_an_agent_calls_a_tool_and_answers_with_its_result(runtime: Runtime) -> None:
    def reply(request: ChatRequest) -> str | ScriptedTurn:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            return f"the sum is {last.text}"
        assert [t.name for t in request.tools] == ["add"]
        return ScriptedTurn(tool_calls=[ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})])

    model = FunctionModel(reply)
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[add])
    assert agent.run("add 2 and 3", timeout=10).text == "the sum is 5"
    assert model.call_count == 2


def test_an_agent_streams_the_chunks_of_a_turn(runtime: Runtime) -> None:
    model = FunctionModel(lambda request: ScriptedTurn(chunks=["one ", "two ", "three"]))
    agent = runtime.start_agent(("s", "main", 0), model=model)
    events = list(agent.stream("count"))
    deltas = [e.delta.delta for e in events if isinstance(e, MessageUpdate)]
    assert deltas == ["one ", "two ", "three"]


def test_a_wrong_return_value_fails_the_run_with_the_type_named(runtime: Runtime) -> None:
    agent = runtime.start_agent(
        ("s", "main", 0),
        model=FunctionModel(lambda request: 3.5),  # type: ignore[arg-type,return-value]
        retry=RetryPolicy(max_retries=0),
    )
    with pytest.raises(RunFailed, match="returned float"):
        agent.run("x", timeout=10)
