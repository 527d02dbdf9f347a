"""The adapter contract: what every adapter promises alike, checked for each wire over real HTTP.

Answers (text, streamed deltas, parallel tool calls, usage and cost, a stream equal to
`generate`, any split of the byte stream), failures on the wire (errors after some text,
disconnects, refused connections), keys, model lists, capability checks before any request,
structured output in the wire's own mode, aborts and read timeouts. What only one wire does
(its request fields, error bodies, quirks) stays in test_<wire>.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from agent_runtime.abort import Aborted, AbortSignal
from agent_runtime.llm import (
    AuthenticationError,
    CapabilityNotSupportedError,
    ChatRequest,
    NetworkError,
    ProviderError,
    RateLimitError,
    StructuredOutputError,
    TextDelta,
    ToolSpec,
    anthropic,
    gemini,
    openai_compatible,
)
from agent_runtime.llm.base import BaseChatModel
from agent_runtime.llm.types import (
    ALL_CAPABILITIES,
    Capability,
    FinishDelta,
    ModelPricing,
    StreamChunk,
    ToolCallDelta,
)
from agent_runtime.messages import ImageContent, TextContent, ToolCall, Usage, UserMessage
from agent_runtime.testing import MockProviderServer, MockResponse, ScriptedTurn
from agent_runtime.testing._wire import WIRE_FORMATS
from agent_runtime.testing.mock_server import RecordedRequest
from tests.agent_runtime.llm import helpers
from tests.agent_runtime.llm.helpers import HI, run

WIRES = ["openai", "anthropic", "gemini"]
PROVIDER = {"openai": "openai_compatible", "anthropic": "anthropic", "gemini": "gemini"}
ABORT_BOUND = 0.25  # the contract says 50 ms; measured ~1 ms here, the bound allows a busy CI

adapter = partial(helpers.adapter, model="model-x")  # one model name across the wires


async def drain(model: BaseChatModel, request: ChatRequest) -> None:
    async for _ in model.stream(request):
        pass


# -- answers ---------------------------------------------------------------------------------------

RAW_STOP = {"openai": "stop", "anthropic": "end_turn", "gemini": "STOP"}
RAW_TOOL_USE = {"openai": "tool_calls", "anthropic": "tool_use", "gemini": "STOP"}


def is_streamed(wire: str, sent: RecordedRequest) -> bool:
    """Whether the request asked for a stream, as its wire says it."""
    if wire == "gemini":
        return sent.path.endswith(":streamGenerateContent") and sent.query == {"alt": ["sse"]}
    return bool(sent.json.get("stream"))


@pytest.mark.parametrize("wire", WIRES)
def test_generate_returns_the_text_with_usage_and_request_id(
    server: MockProviderServer, wire: str
) -> None:
    server.enqueue(ScriptedTurn(text="Hello!", usage=Usage(input_tokens=9, output_tokens=2)))
    response = helpers.generate(adapter(wire, server))
    assert response.text == "Hello!"
    assert (response.stop_reason, response.raw_finish_reason) == ("stop", RAW_STOP[wire])
    assert response.usage == Usage(input_tokens=9, output_tokens=2)
    assert response.request_id == "req_mock"
    assert response.message.provider == PROVIDER[wire]
    assert not is_streamed(wire, server.requests[0])


@pytest.mark.parametrize("wire", WIRES)
def test_a_stream_yields_every_text_delta_in_order_then_one_finish(
    server: MockProviderServer, wire: str
) -> None:
    pieces = [f"w{i} " for i in range(40)]
    server.enqueue(ScriptedTurn(chunks=pieces))
    chunks = helpers.collect(adapter(wire, server))
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == pieces
    assert [c for c in chunks if isinstance(c, FinishDelta)] == [
        FinishDelta(reason="stop", raw_reason=RAW_STOP[wire])
    ]
    assert isinstance(chunks[-1], FinishDelta)
    assert is_streamed(wire, server.requests[0])


@pytest.mark.parametrize("wire", WIRES)
def test_parallel_tool_calls_assemble_whole_each_under_its_own_index(
    server: MockProviderServer, wire: str
) -> None:
    calls = [
        ToolCall(id="call_a", name="read", arguments={"path": "/etc/hosts", "max_bytes": 100}),
        ToolCall(id="call_b", name="search", arguments={"query": "weather in Zürich"}),
        ToolCall(id="call_c", name="noop", arguments={}),
    ]
    server.enqueue(ScriptedTurn(text="Working on it.", tool_calls=calls))
    model = adapter(wire, server)
    chunks = helpers.collect(model)
    deltas = [c for c in chunks if isinstance(c, ToolCallDelta)]
    indexes = list(dict.fromkeys(d.index for d in deltas))  # the wire's own numbering
    assert len(indexes) == 3 and indexes == sorted(indexes)
    if wire != "gemini":  # Gemini sends each call whole; the others stream argument fragments
        assert len(deltas) > 10
    response = helpers.assemble(chunks, model.info)
    assert response.message.tool_calls == calls
    assert response.text == "Working on it."
    assert (response.stop_reason, response.raw_finish_reason) == ("tool_use", RAW_TOOL_USE[wire])


@pytest.mark.parametrize("wire", WIRES)
def test_usage_counts_cached_input_and_the_cost_prices_it(
    server: MockProviderServer, wire: str
) -> None:
    usage = Usage(input_tokens=1000, output_tokens=100, cached_input_tokens=800)
    server.enqueue(ScriptedTurn(text="a", usage=usage), ScriptedTurn(text="a", usage=usage))
    model = adapter(wire, server, pricing=ModelPricing(input=1.0, output=10.0, cached_input=0.1))
    assert helpers.assembled(model).usage == usage
    response = helpers.generate(model)
    assert response.usage == usage
    assert response.cost == pytest.approx((200 * 1.0 + 800 * 0.1 + 100 * 10.0) / 1e6)


@pytest.mark.parametrize("wire", WIRES)
def test_a_collected_stream_equals_generate(server: MockProviderServer, wire: str) -> None:
    turn = ScriptedTurn(
        chunks=["The answer ", "is 4."],
        thinking="2+2",
        thinking_signature="c2lnLTE=",
        tool_calls=[ToolCall(id="call_1", name="check", arguments={"n": 4})],
        usage=Usage(input_tokens=12, output_tokens=8, cached_input_tokens=4),
    )
    server.enqueue(turn, turn)
    model = adapter(wire, server)
    request = ChatRequest(messages=HI.messages, reasoning="low")
    streamed = helpers.assembled(model, request)
    generated = helpers.generate(model, request)
    exclude: dict[str, Any] = {"request_id": True, "message": {"timestamp"}}
    assert streamed.model_dump(exclude=exclude) == generated.model_dump(exclude=exclude)
    assert streamed.raw_finish_reason == RAW_TOOL_USE[wire]


SPLIT_TURN = ScriptedTurn(
    chunks=["Bonjour ", "\u00e0 ", "tous ✓"],
    thinking="hmm",
    thinking_signature="c2ln",
    tool_calls=[
        ToolCall(id="call_1", name="f", arguments={"k": ["v", 1], "path": "/tmp/ä.txt"}),
        ToolCall(id="call_2", name="g", arguments={}),
    ],
    usage=Usage(input_tokens=9, output_tokens=4),
)


@pytest.mark.parametrize("wire", WIRES)
def test_any_split_of_the_byte_stream_assembles_the_same_response(
    server: MockProviderServer, wire: str
) -> None:
    asked = {"stream_options": {"include_usage": True}}  # what the OpenAI adapter asks for
    body = b"".join(WIRE_FORMATS[wire].render_events(SPLIT_TURN, asked, "m"))
    model = adapter(wire, server)
    text = "".join(SPLIT_TURN.chunks or [])

    @settings(max_examples=25, deadline=None)
    @given(cuts=st.lists(st.integers(min_value=0, max_value=len(body)), max_size=12))
    def check(cuts: list[int]) -> None:
        points = sorted({*cuts, 0, len(body)})
        server.enqueue(MockResponse(raw=[body[a:b] for a, b in itertools.pairwise(points)]))
        response = helpers.assembled(model)
        assert response.text == text
        assert response.message.tool_calls == SPLIT_TURN.tool_calls
        assert response.usage == SPLIT_TURN.usage
        assert response.stop_reason == "tool_use"

    check()


# -- capabilities ----------------------------------------------------------------------------------

NEEDS: dict[str, ChatRequest] = {
    "tools": ChatRequest(messages=HI.messages, tools=[ToolSpec(name="lookup")]),
    "vision": ChatRequest(
        messages=[
            UserMessage(
                content=[
                    TextContent(text="what?"),
                    ImageContent(data="AA==", mime_type="image/png"),
                ]
            )
        ]
    ),
    "structured_output": ChatRequest(messages=HI.messages, response_schema={"type": "object"}),
    "reasoning": ChatRequest(messages=HI.messages, reasoning="high"),
    "streaming": HI,
}


@pytest.mark.parametrize("capability", sorted(NEEDS))
@pytest.mark.parametrize("wire", WIRES)
def test_a_missing_capability_is_refused_naming_model_and_capability_before_any_request(
    server: MockProviderServer, wire: str, capability: Capability
) -> None:
    model = adapter(wire, server, capabilities=ALL_CAPABILITIES - {capability})
    request = NEEDS[capability]
    calls: list[Callable[[], Awaitable[Any]]] = [lambda: drain(model, request)]
    if capability != "streaming":
        calls.append(lambda: model.generate(request))
    for call in calls:
        with pytest.raises(CapabilityNotSupportedError) as caught:
            run(model, call)
        assert "'model-x'" in caught.value.message and capability in caught.value.message
        assert caught.value.provider == PROVIDER[wire]
    assert server.requests == []


@pytest.mark.parametrize("wire", WIRES)
def test_generate_needs_no_streaming_capability(server: MockProviderServer, wire: str) -> None:
    server.enqueue("whole")
    model = adapter(wire, server, capabilities=ALL_CAPABILITIES - {"streaming"})
    assert run(model, lambda: model.generate(HI)).text == "whole"


# -- keys ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
@pytest.mark.parametrize("wire", WIRES)
def test_a_callable_key_that_returns_nothing_fails_before_any_request(
    server: MockProviderServer, wire: str, streaming: bool
) -> None:
    model = adapter(wire, server, api_key=lambda: "")
    with pytest.raises(AuthenticationError, match="empty value") as caught:
        run(model, (lambda: drain(model, HI)) if streaming else (lambda: model.generate(HI)))
    assert caught.value.provider == PROVIDER[wire]
    assert server.requests == []


AUTH_HEADER = {"openai": "authorization", "anthropic": "x-api-key", "gemini": "x-goog-api-key"}
DEFAULT_KEY_VARS = {
    "openai": ["OPENAI_API_KEY"],
    "anthropic": ["ANTHROPIC_API_KEY"],
    "gemini": ["GEMINI_API_KEY", "GOOGLE_API_KEY"],
}


def key_sent(wire: str, sent: RecordedRequest) -> str:
    """The API key a request carried, in its wire's header."""
    value = sent.headers[AUTH_HEADER[wire]]
    return value.removeprefix("Bearer ") if wire == "openai" else value


@pytest.mark.parametrize("wire", WIRES)
def test_a_callable_api_key_is_called_for_every_request(
    server: MockProviderServer, wire: str
) -> None:
    keys = iter(["key-1", "key-2"])
    server.enqueue("a", "b")
    model = adapter(wire, server, api_key=lambda: next(keys))
    helpers.generate(model)
    helpers.collect(model)
    assert [key_sent(wire, r) for r in server.requests] == ["key-1", "key-2"]
    if wire == "openai":
        assert server.requests[0].headers["authorization"] == "Bearer key-1"


@pytest.mark.parametrize("wire", WIRES)
def test_the_key_variable_is_read_on_every_request(
    server: MockProviderServer, monkeypatch: pytest.MonkeyPatch, wire: str
) -> None:
    server.enqueue("a", "b")
    model = adapter(wire, server, api_key=None, api_key_env="ADAPTER_TEST_KEY")
    monkeypatch.setenv("ADAPTER_TEST_KEY", "env-1")
    helpers.generate(model)
    monkeypatch.setenv("ADAPTER_TEST_KEY", "env-2")
    helpers.generate(model)
    assert [key_sent(wire, r) for r in server.requests] == ["env-1", "env-2"]


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
@pytest.mark.parametrize("wire", WIRES)
def test_a_missing_key_names_its_variable_before_any_request(
    server: MockProviderServer, monkeypatch: pytest.MonkeyPatch, wire: str, streaming: bool
) -> None:
    for name in DEFAULT_KEY_VARS[wire]:
        monkeypatch.delenv(name, raising=False)
    # A generic OpenAI-compatible server reads no variable unless told (see test_openai.py).
    options = {"api_key_env": "OPENAI_API_KEY"} if wire == "openai" else {}
    model = adapter(wire, server, api_key=None, **options)
    with pytest.raises(AuthenticationError, match=DEFAULT_KEY_VARS[wire][0]) as caught:
        run(model, (lambda: drain(model, HI)) if streaming else (lambda: model.generate(HI)))
    assert caught.value.provider == PROVIDER[wire]
    assert server.requests == []


# -- models ----------------------------------------------------------------------------------------

MODELS_PATH = {"openai": "/v1/models", "anthropic": "/v1/models", "gemini": "/v1beta/models"}


@pytest.mark.parametrize("wire", WIRES)
def test_list_models_returns_the_servers_model_names(server: MockProviderServer, wire: str) -> None:
    server.models = ["alpha", "beta-2"]  # Gemini's wire calls them "models/alpha", ...
    model = adapter(wire, server)
    assert run(model, model.list_models) == ["alpha", "beta-2"]
    sent = server.requests[0]
    assert (sent.method, sent.path) == ("GET", MODELS_PATH[wire])
    assert key_sent(wire, sent) == helpers.KEY[wire]


# -- failures on the wire --------------------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
def test_an_error_after_some_text_raises_mapped_after_that_text(
    server: MockProviderServer, wire: str
) -> None:
    server.enqueue(ScriptedTurn(chunks=["par", "tial"], error=RateLimitError("slow down")))
    seen: list[StreamChunk] = []
    with pytest.raises(RateLimitError, match="slow down") as caught:
        helpers.collect(adapter(wire, server), into=seen)
    assert [c.text for c in seen if isinstance(c, TextDelta)] == ["par", "tial"]
    assert not any(isinstance(c, FinishDelta) for c in seen)
    assert caught.value.retryable and caught.value.provider == PROVIDER[wire]
    assert caught.value.request_id == "req_mock"


DISCONNECT_AFTER = {"openai": 2, "anthropic": 5, "gemini": 2}  # frames: into the text


@pytest.mark.parametrize("wire", WIRES)
def test_a_mid_stream_disconnect_is_a_retryable_network_error(
    server: MockProviderServer, wire: str
) -> None:
    turn = ScriptedTurn(chunks=["a", "b", "c"])
    server.enqueue(MockResponse(turn=turn, disconnect_after=DISCONNECT_AFTER[wire]))
    seen: list[StreamChunk] = []
    with pytest.raises(NetworkError) as caught:
        helpers.collect(adapter(wire, server), into=seen)
    assert caught.value.retryable and caught.value.provider == PROVIDER[wire]
    assert not any(isinstance(c, FinishDelta) for c in seen)


def closed_port_url() -> str:
    """The URL of a loopback port nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
@pytest.mark.parametrize("wire", WIRES)
def test_a_refused_first_connection_is_a_final_network_error_naming_the_url(
    wire: str, streaming: bool
) -> None:
    """Nothing has ever answered at this URL: retrying cannot help (issue 35.15; a refusal
    after the server has answered stays retryable, tests/agent_runtime/llm/test_transport.py)."""
    url = closed_port_url()
    if wire == "openai":
        model: Any = openai_compatible(f"{url}/v1", "m", api_key="k")
    elif wire == "anthropic":
        model = anthropic("m", "k", base_url=url)
    else:
        model = gemini("m", "k", base_url=url, connect_timeout=2)
    with pytest.raises(NetworkError) as caught:
        helpers.collect(model) if streaming else helpers.generate(model)
    error = caught.value
    assert not error.retryable and error.provider == PROVIDER[wire]
    assert error.code == "connection_refused" and url in error.message


# -- structured output -----------------------------------------------------------------------------


class City(BaseModel):
    name: str
    population: int


def _json_after(text: str, marker: str) -> Any:
    return json.loads(text[text.index(marker) + len(marker) :].strip())


def schema_sent(wire: str, body: dict[str, Any]) -> Any:
    """The JSON schema the request body asks for, in the wire's own structured-output mode."""
    if wire == "openai":
        assert body["response_format"]["type"] == "json_schema"
        return body["response_format"]["json_schema"]["schema"]
    if wire == "anthropic":  # no JSON-schema mode in the Messages API: JSON mode in the system
        assert "output_format" not in body
        return _json_after(body["system"], "JSON schema:")
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    return body["generationConfig"]["responseJsonSchema"]


def system_sent(wire: str, body: dict[str, Any]) -> str:
    if wire == "openai":
        first = body["messages"][0]
        assert first["role"] == "system"
        return str(first["content"])
    if wire == "anthropic":
        return str(body["system"])
    return str(body["systemInstruction"]["parts"][0]["text"])


@pytest.mark.parametrize("wire", WIRES)
def test_structured_output_asks_in_the_wire_mode_and_validates(
    server: MockProviderServer, wire: str
) -> None:
    server.enqueue('{"name": "Oslo", "population": 709000}')
    model = adapter(wire, server)
    city = run(model, lambda: model.generate_structured(HI, City))
    assert city == City(name="Oslo", population=709000)
    assert schema_sent(wire, server.requests[0].json) == City.model_json_schema()


@pytest.mark.parametrize("wire", WIRES)
def test_without_the_capability_structured_output_is_json_mode_in_the_system_prompt(
    server: MockProviderServer, wire: str
) -> None:
    server.enqueue('{"name": "Rome", "population": 2750000}')
    model = adapter(wire, server, capabilities=ALL_CAPABILITIES - {"structured_output"})
    assert run(model, lambda: model.generate_structured(HI, City)).name == "Rome"
    body = server.requests[0].json
    assert "response_format" not in body and "generationConfig" not in body
    assert _json_after(system_sent(wire, body), "schema:") == City.model_json_schema()


@pytest.mark.parametrize("wire", WIRES)
def test_a_structured_answer_that_does_not_validate_raises_with_the_errors(
    server: MockProviderServer, wire: str
) -> None:
    server.enqueue('{"name": "Oslo", "population": "many"}')
    model = adapter(wire, server)
    with pytest.raises(StructuredOutputError) as caught:
        run(model, lambda: model.generate_structured(HI, City))
    assert caught.value.raw == '{"name": "Oslo", "population": "many"}'
    assert [e["loc"] for e in caught.value.errors] == [("population",)]
    assert caught.value.provider == PROVIDER[wire]


# -- abort and timeouts ----------------------------------------------------------------------------


async def until(predicate: Callable[[], object], timeout: float = 5.0) -> None:
    """Wait on the running loop until `predicate()` holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.001)


HANG_AFTER = {"openai": 2, "anthropic": 4, "gemini": 1}  # frames before the first text delta


def silent_answer(server: MockProviderServer, wire: str, streaming: bool) -> None:
    """Queue an answer that goes silent: before its status line, or after its first text."""
    turn = ScriptedTurn(chunks=["first", "never"])
    if streaming:
        server.enqueue(MockResponse(turn=turn, hang_after=HANG_AFTER[wire]))
    else:
        server.enqueue(MockResponse(turn=turn, delay=30.0))


@pytest.mark.timing
@pytest.mark.parametrize("how", ["signal", "cancel"])
@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
@pytest.mark.parametrize("wire", WIRES)
def test_an_abort_closes_the_connection_at_once_while_the_server_is_silent(
    server: MockProviderServer, wire: str, streaming: bool, how: str
) -> None:
    silent_answer(server, wire, streaming)
    model = adapter(wire, server)
    signal = AbortSignal()
    marks: dict[str, float] = {}
    received: list[object] = []

    def abort() -> None:
        marks["aborted"] = time.monotonic()
        signal.abort("user")

    async def call() -> None:
        if streaming:
            async for chunk in model.stream(HI, signal=signal):
                if isinstance(chunk, TextDelta):
                    received.append(chunk)
        else:
            received.append(await model.generate(HI, signal=signal))

    async def scenario() -> None:
        task = asyncio.ensure_future(call())
        # the request is in and the server has gone silent: the next read is pending
        await until(lambda: server.requests and (received or not streaming))
        await asyncio.sleep(0.02)
        if how == "signal":
            threading.Thread(target=abort).start()  # as a caller on another thread would
            with pytest.raises(Aborted):
                await task
        else:
            marks["aborted"] = time.monotonic()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            assert task.cancelled()
        marks["raised"] = time.monotonic()
        # still on the live loop: nothing but the abort itself can have closed the response
        marks["disconnected"] = await server.disconnected(timeout=1)

    run(model, scenario)
    assert received == ([TextDelta(text="first")] if streaming else [])
    latency = marks["disconnected"] - marks["aborted"]
    print(f"{wire} {'stream' if streaming else 'generate'} {how}: {latency * 1000:.2f} ms")
    assert marks["raised"] - marks["aborted"] < ABORT_BOUND
    assert latency < ABORT_BOUND


@pytest.mark.timing
@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
@pytest.mark.parametrize("wire", WIRES)
def test_a_read_timeout_is_a_retryable_network_error(
    server: MockProviderServer, wire: str, streaming: bool
) -> None:
    server.enqueue(MockResponse(turn=ScriptedTurn(text="too late"), delay=5.0))
    model = adapter(wire, server, timeout=0.2)
    started = time.monotonic()
    with pytest.raises(NetworkError, match="ReadTimeout") as caught:
        run(model, (lambda: drain(model, HI)) if streaming else (lambda: model.generate(HI)))
    assert time.monotonic() - started < 2.0
    assert caught.value.retryable and caught.value.provider == PROVIDER[wire]


# -- garbled streams -------------------------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
def test_a_stream_event_that_is_not_json_is_a_network_error(
    server: MockProviderServer, wire: str
) -> None:
    server.enqueue(MockResponse(events=["<html>oops</html>"]))
    model = adapter(wire, server)
    with pytest.raises(NetworkError, match="not JSON") as caught:
        run(model, lambda: drain(model, HI))
    assert caught.value.retryable and caught.value.request_id == "req_mock"
    assert caught.value.provider == PROVIDER[wire]


@pytest.mark.parametrize("wire", WIRES)
def test_an_error_event_that_is_not_json_is_mapped_from_its_text(
    server: MockProviderServer, wire: str
) -> None:
    server.enqueue(MockResponse(events=[("error", "upstream exploded")]))
    model = adapter(wire, server)
    with pytest.raises(ProviderError, match="upstream exploded") as caught:
        run(model, lambda: drain(model, HI))
    assert caught.value.request_id == "req_mock" and caught.value.provider == PROVIDER[wire]
