"""The ChatModel port over ScriptedModel: scripts, sync twins, abort, capabilities, structure."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from pydantic import BaseModel, ValidationError

from agent_runtime import ConfigError
from agent_runtime.abort import Aborted, AbortSignal
from agent_runtime.config import RuntimeConfig
from agent_runtime.llm import (
    CapabilityNotSupportedError,
    ChatModel,
    ChatRequest,
    ModelPricing,
    StructuredOutputError,
    ToolSpec,
    TruncatedResponseError,
)
from agent_runtime.llm.factory import from_config
from agent_runtime.messages import ImageContent, ToolCall, Usage, UserMessage
from agent_runtime.testing.scripted import ScriptedModel, ScriptedTurn, ScriptExhausted
from agent_runtime.tools import ToolRegistry, tool

REQUEST = ChatRequest(messages=[UserMessage(content="hi")])


def test_scripted_model_plays_turns_in_order_and_records_requests() -> None:
    model = ScriptedModel(["one", ScriptedTurn(chunks=["t", "wo"])])
    assert isinstance(model, ChatModel)
    assert model.prompt_sync("a") == "one"
    assert model.prompt_sync("b", system="sys") == "two"
    assert model.call_count == 2
    assert model.requests[1].system == "sys"
    with pytest.raises(ScriptExhausted, match="script had 2 turns"):
        model.prompt_sync("c")


def test_a_scripted_model_told_not_to_record_counts_its_calls_and_keeps_no_request() -> None:
    model = ScriptedModel(["one"], record_requests=False)
    assert model.prompt_sync("a") == "one"
    assert model.call_count == 1 and model.requests == []
    with pytest.raises(ScriptExhausted, match="no turn left for call 2"):
        model.prompt_sync("b")
    assert model.call_count == 2


def test_chunks_stream_as_separate_deltas() -> None:
    model = ScriptedModel([ScriptedTurn(chunks=["a", "b", "c"])])

    async def texts() -> list[str]:
        return [c.text async for c in model.stream(REQUEST) if c.type == "text"]

    assert asyncio.run(texts()) == ["a", "b", "c"]


def test_chunks_must_add_up_to_the_text() -> None:
    with pytest.raises(ValueError, match="do not add up"):
        ScriptedTurn(text="abc", chunks=["a", "b"])


def test_tool_calls_and_usage_come_out_of_generate() -> None:
    call = ToolCall(id="c1", name="f", arguments={"x": 1})
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[call], usage=Usage(input_tokens=5, output_tokens=2))],
        pricing=ModelPricing(input=1.0, output=2.0),
    )
    response = model.generate_sync(REQUEST)
    assert response.message.tool_calls == [call]
    assert response.stop_reason == "tool_use"
    assert response.cost == pytest.approx((5 * 1.0 + 2 * 2.0) / 1e6)


def test_echo_answers_when_the_script_is_empty() -> None:
    assert ScriptedModel(echo=True).prompt_sync("ping") == "echo: ping"


def test_sync_twin_refuses_to_run_inside_an_event_loop() -> None:
    async def inside() -> None:
        ScriptedModel(["x"]).prompt_sync("hi")

    with pytest.raises(RuntimeError, match="await"):
        asyncio.run(inside())


def test_sync_twin_times_out() -> None:
    with pytest.raises(TimeoutError):
        ScriptedModel([ScriptedTurn(text="slow", delay=5.0)]).generate_sync(REQUEST, timeout=0.05)


@pytest.mark.timing
def test_abort_signal_ends_a_hung_stream_at_once() -> None:
    model = ScriptedModel([ScriptedTurn(chunks=["a", "b"], chunk_delay=30.0)])
    signal = AbortSignal()

    async def run() -> float:
        stream = model.stream(REQUEST, signal=signal)
        await anext(stream)
        threading.Timer(0.02, signal.abort, args=("user_abort",)).start()
        started = time.monotonic()
        with pytest.raises(Aborted) as info:
            await anext(stream)
        assert info.value.reason == "user_abort"
        return time.monotonic() - started

    assert asyncio.run(run()) < 0.5


@pytest.mark.timing
def test_abort_signal_ends_generate_at_once() -> None:
    model = ScriptedModel([ScriptedTurn(text="x", delay=30.0)])
    signal = AbortSignal()
    threading.Timer(0.02, signal.abort).start()
    started = time.monotonic()
    with pytest.raises(Aborted):
        model.generate_sync(REQUEST, signal=signal)
    assert time.monotonic() - started < 0.5


def test_cancelling_the_task_ends_a_hung_stream() -> None:
    model = ScriptedModel([ScriptedTurn(text="x", delay=30.0)])

    async def run() -> bool:
        async def consume() -> None:
            async for _ in model.stream(REQUEST):
                pass

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 1.0)
        return task.cancelled()

    assert asyncio.run(run())


@pytest.mark.parametrize(
    ("request_", "missing"),
    [
        (ChatRequest(tools=[ToolSpec(name="f")]), "tools"),
        (ChatRequest(response_schema={"type": "object"}), "structured_output"),
        (ChatRequest(reasoning="high"), "reasoning"),
        (
            ChatRequest(
                messages=[UserMessage(content=[ImageContent(data="AA==", mime_type="image/png")])]
            ),
            "vision",
        ),
    ],
)
def test_missing_capability_is_refused_before_the_call(request_: ChatRequest, missing: str) -> None:
    model = ScriptedModel(["never"], capabilities=["streaming"], model="tiny")
    with pytest.raises(CapabilityNotSupportedError) as info:
        model.generate_sync(request_)
    assert missing in str(info.value) and "tiny" in str(info.value)
    assert model.call_count == 0


class Weather(BaseModel):
    city: str
    celsius: float


def test_structured_output_uses_schema_mode_and_validates() -> None:
    model = ScriptedModel(['{"city": "Oslo", "celsius": -3.5}'])
    result = asyncio.run(model.generate_structured(REQUEST, Weather))
    assert result == Weather(city="Oslo", celsius=-3.5)
    assert model.requests[0].response_schema == Weather.model_json_schema()


def test_structured_output_falls_back_to_json_mode_and_tolerates_a_fence() -> None:
    model = ScriptedModel(
        ['```json\n{"city": "Rome", "celsius": 20}\n```'], capabilities=["streaming"]
    )
    assert model.generate_structured_sync(REQUEST, Weather).city == "Rome"
    sent = model.requests[0]
    assert sent.response_schema is None and sent.system is not None and "celsius" in sent.system


def test_structured_output_validation_failure_carries_the_errors() -> None:
    model = ScriptedModel(['{"city": "Oslo"}'])
    with pytest.raises(StructuredOutputError) as info:
        model.generate_structured_sync(REQUEST, Weather)
    assert info.value.raw == '{"city": "Oslo"}'
    assert any(e["loc"] == ("celsius",) for e in info.value.errors)


def test_structured_output_refuses_a_truncated_answer() -> None:
    model = ScriptedModel([ScriptedTurn(text='{"city": "Os', stop_reason="length")])
    with pytest.raises(TruncatedResponseError, match="max_output_tokens"):
        model.generate_structured_sync(REQUEST, Weather)


def test_a_request_takes_tools_as_they_are_and_keeps_their_specs() -> None:
    @tool
    def lookup(city: str) -> str:
        """Look a city up."""
        return city

    registry = ToolRegistry()
    registry.register(lookup)
    by_hand = ToolSpec(name="clock", description="The time.")
    request = ChatRequest(messages=REQUEST.messages, tools=[*registry.all(), by_hand])
    assert request.tools == [lookup.spec(), by_hand]
    assert ScriptedModel(["ok"]).generate_sync(request).text == "ok"
    assert ChatRequest.model_validate_json(request.model_dump_json()) == request


def test_a_request_names_a_tool_it_cannot_take() -> None:
    with pytest.raises(ValidationError, match=r"tools\.0"):
        ChatRequest(tools=["lookup"])


def test_from_config_builds_the_offline_scripted_profile() -> None:
    model = from_config("scripted", config=RuntimeConfig())
    assert model.info.provider == "scripted"
    assert model.prompt_sync("hello") == "echo: hello"


def test_from_config_names_a_missing_api_key_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        from_config("openai", config=RuntimeConfig())


def test_from_config_rejects_an_unknown_profile() -> None:
    with pytest.raises(ConfigError, match="unknown model profile 'nope'"):
        from_config("nope", config=RuntimeConfig())


def test_a_stream_calls_the_model_and_checks_capabilities_at_its_first_read() -> None:
    request_ = ChatRequest(
        messages=[UserMessage(content=[ImageContent(data="aGk=", mime_type="image/png")])]
    )
    model = ScriptedModel(["never"], capabilities=["streaming"], model="tiny")

    async def main() -> None:
        chunks = model.stream(request_)
        assert model.call_count == 0  # nothing taken, nothing checked, until it is read
        with pytest.raises(CapabilityNotSupportedError, match="vision"):
            await anext(chunks)
        assert model.call_count == 0

    asyncio.run(main())
