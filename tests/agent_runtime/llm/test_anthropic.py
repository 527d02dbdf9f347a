"""The Anthropic adapter over real HTTP, against the mock server's Anthropic wire format."""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import socket
import time
from functools import partial
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_runtime.abort import Aborted, AbortSignal
from agent_runtime.llm.errors import (
    AuthenticationError,
    CapabilityNotSupportedError,
    ContextLengthExceededError,
    InvalidRequestError,
    LLMError,
    ModelNotFoundError,
    NetworkError,
    PermissionDeniedError,
    ProviderError,
    QuotaExceededError,
    RateLimitError,
)
from agent_runtime.llm.providers.anthropic import anthropic
from agent_runtime.llm.types import (
    ChatRequest,
    ChatResponse,
    FinishDelta,
    ModelPricing,
    StreamChunk,
    TextDelta,
    ToolSpec,
)
from agent_runtime.messages import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from agent_runtime.testing._wire_anthropic import AnthropicWire
from agent_runtime.testing.mock_server import MockProviderServer, MockResponse
from agent_runtime.testing.scripted import ScriptedTurn
from tests.agent_runtime.llm.helpers import HI, adapter, assembled, collect, generate, run

ABORT_BOUND = 0.25

model_for = partial(adapter, "anthropic")


def comparable(response: ChatResponse) -> dict[str, Any]:
    data = response.model_dump(exclude={"request_id"})
    del data["message"]["timestamp"]
    return data


def event(kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    return kind, {"type": kind, **fields}


def start(usage: dict[str, int] | None = None) -> tuple[str, dict[str, Any]]:
    message = {"id": "msg_1", "role": "assistant", "content": [], "usage": usage or {}}
    return event("message_start", message=message)


def block_start(index: int, **block: Any) -> tuple[str, dict[str, Any]]:
    return event("content_block_start", index=index, content_block=block)


def delta(index: int, **body: Any) -> tuple[str, dict[str, Any]]:
    return event("content_block_delta", index=index, delta=body)


def finish(reason: str = "end_turn", output: int = 5) -> list[tuple[str, dict[str, Any]]]:
    return [
        event("message_delta", delta={"stop_reason": reason}, usage={"output_tokens": output}),
        event("message_stop"),
    ]


# -- answers ------------------------------------------------------------------------------------


def test_generate_returns_the_text_with_usage_and_request_id(server: MockProviderServer) -> None:
    server.enqueue(ScriptedTurn(text="Hello!", usage=Usage(input_tokens=12, output_tokens=3)))
    response = generate(model_for(server))
    assert response.text == "Hello!"
    assert response.stop_reason == "stop"
    assert response.usage == Usage(input_tokens=12, output_tokens=3)
    assert response.request_id == "req_mock"
    assert response.message.provider == "anthropic"
    assert "stream" not in server.requests[0].json


def test_stream_yields_each_text_delta_and_one_finish(server: MockProviderServer) -> None:
    pieces = [f"w{i} " for i in range(40)]
    server.enqueue(ScriptedTurn(chunks=pieces))
    chunks = collect(model_for(server))
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == pieces
    assert [c for c in chunks if isinstance(c, FinishDelta)] == [
        FinishDelta(reason="stop", raw_reason="end_turn")
    ]
    assert isinstance(chunks[-1], FinishDelta)
    assert server.requests[0].json["stream"] is True


def test_parallel_tool_calls_assemble_from_fragments(server: MockProviderServer) -> None:
    calls = [
        ToolCall(id="toolu_1", name="weather", arguments={"city": "Paris", "days": 3}),
        ToolCall(id="toolu_2", name="time", arguments={"zone": "Europe/Paris"}),
    ]
    server.enqueue(ScriptedTurn(text="Checking.", tool_calls=calls))
    response = assembled(model_for(server))
    assert response.message.tool_calls == calls
    assert response.stop_reason == "tool_use"
    assert response.text == "Checking."


def test_interleaved_tool_fragments_are_grouped_by_block_index(
    server: MockProviderServer,
) -> None:
    server.enqueue(
        MockResponse(
            events=[
                start(),
                block_start(0, type="tool_use", id="a", name="f", input={}),
                block_start(1, type="tool_use", id="b", name="g", input={}),
                delta(1, type="input_json_delta", partial_json='{"y"'),
                delta(0, type="input_json_delta", partial_json='{"x"'),
                delta(0, type="input_json_delta", partial_json=": 1}"),
                delta(1, type="input_json_delta", partial_json=": 2}"),
                *finish("tool_use"),
            ]
        )
    )
    response = assembled(model_for(server))
    assert response.message.tool_calls == [
        ToolCall(id="a", name="f", arguments={"x": 1}),
        ToolCall(id="b", name="g", arguments={"y": 2}),
    ]


def test_usage_counts_cached_input(server: MockProviderServer) -> None:
    usage = Usage(input_tokens=1000, output_tokens=20, cached_input_tokens=800)
    server.enqueue(ScriptedTurn(text="a", usage=usage), ScriptedTurn(text="a", usage=usage))
    model = model_for(server, pricing=ModelPricing(input=3.0, output=15.0, cached_input=0.3))
    streamed = assembled(model)
    generated = generate(model)
    assert streamed.usage == generated.usage == usage
    assert generated.cost == pytest.approx((200 * 3.0 + 800 * 0.3 + 20 * 15.0) / 1e6)


def test_a_collected_stream_equals_generate(server: MockProviderServer) -> None:
    turn = ScriptedTurn(
        chunks=["The ", "answer ", "is"],
        thinking="Let me think.",
        thinking_signature="EqQBCkgIARABGAIiQL",
        tool_calls=[ToolCall(id="toolu_9", name="calc", arguments={"expr": "6*7"})],
        usage=Usage(input_tokens=50, output_tokens=30, cached_input_tokens=10),
    )
    server.enqueue(turn, turn)
    model = model_for(server)
    request = ChatRequest(messages=[UserMessage(content="6*7?")], reasoning="low")
    streamed = assembled(model, request)
    generated = generate(model, request)
    assert comparable(streamed) == comparable(generated)


def test_max_tokens_stop_is_a_truncated_answer(server: MockProviderServer) -> None:
    server.enqueue(ScriptedTurn(text="cut o", stop_reason="length"))
    response = generate(model_for(server))
    assert response.truncated and response.raw_finish_reason == "max_tokens"


def test_a_refusal_ends_with_stop_reason_error(server: MockProviderServer) -> None:
    server.enqueue(MockResponse(events=[start(), *finish("refusal")]))
    response = assembled(model_for(server))
    assert response.stop_reason == "error"
    assert response.raw_finish_reason == "refusal"


def test_a_ping_mid_stream_changes_nothing(server: MockProviderServer) -> None:
    server.enqueue(
        MockResponse(
            events=[
                start({"input_tokens": 4, "output_tokens": 1}),
                event("ping"),
                block_start(0, type="text", text=""),
                delta(0, type="text_delta", text="Hel"),
                event("ping"),
                delta(0, type="text_delta", text="lo"),
                event("content_block_stop", index=0),
                event("ping"),
                *finish(),
            ]
        )
    )
    response = assembled(model_for(server))
    assert response.text == "Hello"
    assert response.usage == Usage(input_tokens=4, output_tokens=5)


# -- thinking -----------------------------------------------------------------------------------


def test_thinking_and_signature_come_back_byte_identical(server: MockProviderServer) -> None:
    signature = 'ErUBCkYIBhgCIkB+/=\u00e9\\"x\n'
    server.enqueue(
        ScriptedTurn(text="42", thinking="Six times seven.", thinking_signature=signature),
        "ok",
    )
    model = model_for(server)
    first = ChatRequest(messages=[UserMessage(content="6*7?")], reasoning="high")
    response = assembled(model, first)
    assert response.message.content[0] == ThinkingContent(
        thinking="Six times seven.", signature=signature
    )
    follow_up = first.model_copy(
        update={"messages": [*first.messages, response.message, UserMessage(content="why?")]}
    )
    generate(model, follow_up)
    sent = server.requests[1].json["messages"][1]["content"]
    assert sent[0] == {"type": "thinking", "thinking": "Six times seven.", "signature": signature}
    assert sent[1] == {"type": "text", "text": "42"}


def test_redacted_thinking_round_trips(server: MockProviderServer) -> None:
    server.enqueue(
        MockResponse(
            events=[
                start(),
                block_start(0, type="thinking", thinking="", signature=""),
                delta(0, type="thinking_delta", thinking="visible"),
                delta(0, type="signature_delta", signature="sig-1"),
                event("content_block_stop", index=0),
                block_start(1, type="redacted_thinking", data="EmwKAhgBEgy3va3pzix/LafPsn4a"),
                event("content_block_stop", index=1),
                block_start(2, type="text", text=""),
                delta(2, type="text_delta", text="done"),
                event("content_block_stop", index=2),
                *finish(),
            ]
        ),
        "ok",
    )
    model = model_for(server)
    response = assembled(model)
    assert response.message.content == [
        ThinkingContent(thinking="visible", signature="sig-1"),
        ThinkingContent(thinking="", signature="EmwKAhgBEgy3va3pzix/LafPsn4a", redacted=True),
        TextContent(text="done"),
    ]
    generate(model, ChatRequest(messages=[*HI.messages, response.message]))
    assert server.requests[1].json["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "visible", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
        {"type": "text", "text": "done"},
    ]


# -- the request on the wire ----------------------------------------------------------------------


def test_the_request_carries_auth_system_tools_results_and_thinking(
    server: MockProviderServer,
) -> None:
    server.enqueue("ok")
    call = ToolCall(id="toolu_1", name="lookup", arguments={"q": "x"})
    request = ChatRequest(
        system="You are terse.",
        messages=[
            UserMessage(content="find x"),
            AssistantMessage(content=[call]),
            ToolResultMessage(
                tool_call_id="toolu_1", tool_name="lookup", content=[TextContent(text="found")]
            ),
        ],
        tools=[ToolSpec(name="lookup", description="Look up.")],
        tool_choice="auto",
        reasoning="medium",
        temperature=0.5,
        max_output_tokens=2000,
    )
    generate(model_for(server, api_key="sk-secret", anthropic_version="2023-06-01"), request)
    sent = server.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.headers["x-api-key"] == "sk-secret"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["content-type"] == "application/json"
    body = sent.json
    assert body["model"] == "claude-test"
    assert body["system"] == "You are terse."
    assert all(m["role"] != "system" for m in body["messages"])
    assert body["tools"] == [
        {
            "name": "lookup",
            "description": "Look up.",
            "input_schema": {"type": "object", "properties": {}},
        }
    ]
    assert body["tool_choice"] == {"type": "auto"}
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x"}}],
    }
    assert body["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": [{"type": "text", "text": "found"}],
            "is_error": False,
        }
    ]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert body["max_tokens"] == 2000 + 8192
    assert "temperature" not in body


def test_a_callable_api_key_is_called_for_every_request(server: MockProviderServer) -> None:
    keys = iter(["sk-1", "sk-2"])
    server.enqueue("a", "b")
    model = model_for(server, api_key=lambda: next(keys))
    generate(model)
    collect(model)
    assert [r.headers["x-api-key"] for r in server.requests] == ["sk-1", "sk-2"]


def test_the_env_var_is_read_on_every_request(
    server: MockProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.enqueue("a", "b")
    model = model_for(server, api_key=None, api_key_env="ANTHROPIC_TEST_KEY")
    monkeypatch.setenv("ANTHROPIC_TEST_KEY", "sk-env-1")
    generate(model)
    monkeypatch.setenv("ANTHROPIC_TEST_KEY", "sk-env-2")
    generate(model)
    assert [r.headers["x-api-key"] for r in server.requests] == ["sk-env-1", "sk-env-2"]


def test_a_missing_key_names_the_env_var_before_any_request(
    server: MockProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    model = model_for(server, api_key=None)
    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY"):
        generate(model)
    with pytest.raises(AuthenticationError, match="ANTHROPIC_API_KEY"):
        collect(model)
    assert server.requests == []


def test_a_missing_capability_fails_before_any_request(server: MockProviderServer) -> None:
    model = model_for(server, capabilities={"streaming", "tools"})
    request = ChatRequest(messages=HI.messages, reasoning="high")
    with pytest.raises(CapabilityNotSupportedError, match="reasoning"):
        generate(model, request)
    with pytest.raises(CapabilityNotSupportedError, match="reasoning"):
        collect(model, request)
    assert server.requests == []


def test_list_models(server: MockProviderServer) -> None:
    server.models = ["claude-a", "claude-b"]
    model = model_for(server)
    assert run(model, model.list_models) == ["claude-a", "claude-b"]
    sent = server.requests[0]
    assert (sent.method, sent.path, sent.format) == ("GET", "/v1/models", "anthropic")
    assert sent.headers["x-api-key"] == "sk-test"


def test_list_models_follows_every_page() -> None:
    # the mock server serves one page; pagination needs a handler that reads `after_id`
    pages = {
        None: {"data": [{"id": "c-1"}, {"id": "c-2"}], "has_more": True, "last_id": "c-2"},
        "c-2": {"data": [{"id": "c-3"}], "has_more": False, "last_id": "c-3"},
    }
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        after = request.url.params.get("after_id")
        seen.append(after)
        return httpx.Response(200, json=pages[after])

    model = anthropic("claude-test", "sk", transport=httpx.MockTransport(handler))
    assert run(model, model.list_models) == ["c-1", "c-2", "c-3"]
    assert seen == [None, "c-2"]


SPLIT_TURN = ScriptedTurn(
    chunks=["Bonjour ", "\u00e0 ", "tous"],
    thinking="hmm",
    thinking_signature="c2ln",
    tool_calls=[ToolCall(id="toolu_1", name="f", arguments={"k": ["v", 1]})],
    usage=Usage(input_tokens=9, output_tokens=4),
)


def test_any_split_of_the_byte_stream_assembles_the_same_response(
    server: MockProviderServer,
) -> None:
    body = b"".join(AnthropicWire().render_events(SPLIT_TURN, {}, "m"))
    model = model_for(server)

    @settings(max_examples=25, deadline=None)
    @given(cuts=st.lists(st.integers(min_value=0, max_value=len(body)), max_size=12))
    def check(cuts: list[int]) -> None:
        points = sorted({*cuts, 0, len(body)})
        server.enqueue(MockResponse(raw=[body[a:b] for a, b in itertools.pairwise(points)]))
        response = assembled(model)
        assert response.message.content == [
            ThinkingContent(thinking="hmm", signature="c2ln"),
            TextContent(text="Bonjour \u00e0 tous"),
            *SPLIT_TURN.tool_calls,
        ]
        assert response.usage == SPLIT_TURN.usage

    check()


# -- errors -------------------------------------------------------------------------------------

CREDIT = "Your credit balance is too low to access the Anthropic API. Go to Plans & Billing."
ERROR_ROWS: list[tuple[LLMError, type[LLMError], int, bool]] = [
    (InvalidRequestError("messages: field required"), InvalidRequestError, 400, False),
    (
        ContextLengthExceededError("prompt is too long: 210000 tokens > 200000 maximum"),
        ContextLengthExceededError,
        400,
        False,
    ),
    (InvalidRequestError(CREDIT), QuotaExceededError, 400, False),
    (AuthenticationError("invalid x-api-key"), AuthenticationError, 401, False),
    (QuotaExceededError(CREDIT, status=402), QuotaExceededError, 402, False),
    (PermissionDeniedError("no access to this model"), PermissionDeniedError, 403, False),
    (ModelNotFoundError("model: claude-nope"), ModelNotFoundError, 404, False),
    (RateLimitError("rate limited", retry_after=7), RateLimitError, 429, True),
    (QuotaExceededError(CREDIT), QuotaExceededError, 429, False),
    (ProviderError("Internal server error"), ProviderError, 500, True),
    (ProviderError("Service unavailable", status=503), ProviderError, 503, True),
    (ProviderError("Overloaded", status=529), ProviderError, 529, True),
]


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
@pytest.mark.parametrize(
    ("scripted", "expected", "status", "retryable"),
    ERROR_ROWS,
    ids=[f"{row[2]}-{row[1].__name__}" for row in ERROR_ROWS],
)
def test_error_statuses_map_to_errors(
    server: MockProviderServer,
    scripted: LLMError,
    expected: type[LLMError],
    status: int,
    retryable: bool,
    streaming: bool,
) -> None:
    server.enqueue(ScriptedTurn(error=scripted))
    model = model_for(server)
    with pytest.raises(expected) as caught:
        collect(model) if streaming else generate(model)
    error = caught.value
    assert type(error) is expected
    assert (error.provider, error.status, error.retryable) == ("anthropic", status, retryable)
    assert error.request_id == "req_mock"
    assert error.retry_after == scripted.retry_after
    assert scripted.message in error.message


def _rate_limited(headers: dict[str, str]) -> MockResponse:
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    return MockResponse(status=429, body=body, headers=headers)


@pytest.mark.parametrize(
    ("headers", "low", "high"),
    [
        ({"retry-after-ms": "1500"}, 1.5, 1.5),
        ({"retry-after": "12"}, 12.0, 12.0),
        ({"retry-after": "HTTP-DATE"}, 25.0, 31.0),
    ],
    ids=["retry-after-ms", "retry-after-seconds", "retry-after-http-date"],
)
def test_rate_limits_honour_every_retry_after_form(
    server: MockProviderServer, headers: dict[str, str], low: float, high: float
) -> None:
    if headers.get("retry-after") == "HTTP-DATE":
        headers = {"retry-after": email.utils.formatdate(time.time() + 30, usegmt=True)}
    server.enqueue(_rate_limited(headers))
    with pytest.raises(RateLimitError) as caught:
        generate(model_for(server))
    assert caught.value.retry_after is not None
    assert low <= caught.value.retry_after <= high
    assert caught.value.retryable


def test_an_overloaded_error_event_mid_stream_raises_provider_error(
    server: MockProviderServer,
) -> None:
    server.enqueue(
        ScriptedTurn(chunks=["par", "tial"], error=ProviderError("Overloaded", status=529))
    )
    seen: list[StreamChunk] = []
    with pytest.raises(ProviderError) as caught:
        collect(model_for(server), into=seen)
    error = caught.value
    assert (error.status, error.retryable, error.request_id) == (529, True, "req_mock")
    assert "overloaded_error" in str(error)
    assert [c.text for c in seen if isinstance(c, TextDelta)] == ["par", "tial"]
    assert not any(isinstance(c, FinishDelta) for c in seen)


def test_an_error_event_in_a_200_stream_is_mapped_by_its_type(server: MockProviderServer) -> None:
    server.enqueue(
        MockResponse(
            events=[
                start(),
                event("error", error={"type": "rate_limit_error", "message": "too fast"}),
            ]
        )
    )
    with pytest.raises(RateLimitError, match="too fast"):
        collect(model_for(server))


def test_a_mid_stream_disconnect_is_a_network_error(server: MockProviderServer) -> None:
    server.enqueue(MockResponse(turn=ScriptedTurn(chunks=["a", "b", "c"]), disconnect_after=5))
    seen: list[StreamChunk] = []
    with pytest.raises(NetworkError) as caught:
        collect(model_for(server), into=seen)
    assert caught.value.retryable and caught.value.provider == "anthropic"
    assert not any(isinstance(c, FinishDelta) for c in seen)


def test_a_refused_connection_is_a_network_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = anthropic("claude-test", "sk", base_url=f"http://127.0.0.1:{port}")
    with pytest.raises(NetworkError) as caught:
        generate(model)
    assert caught.value.retryable
    with pytest.raises(NetworkError):
        collect(model)


# -- abort --------------------------------------------------------------------------------------


def _hanging(server: MockProviderServer) -> None:
    # message_start, ping, text start, one text delta; then silence
    server.enqueue(MockResponse(turn=ScriptedTurn(chunks=["a", "b"]), hang_after=4))


def _disconnect_latency(disconnected_at: float, aborted_at: float) -> float:
    latency = disconnected_at - aborted_at
    print(f"abort -> disconnect seen by the server: {latency * 1000:.1f} ms")
    return latency


def test_cancelling_the_streaming_task_closes_the_response(server: MockProviderServer) -> None:
    _hanging(server)
    model = model_for(server)

    async def main() -> tuple[float, float]:
        first = asyncio.Event()

        async def consume() -> None:
            async for chunk in model.stream(HI):
                if isinstance(chunk, TextDelta):
                    first.set()

        task = asyncio.create_task(consume())
        await first.wait()
        cancelled_at = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # on the live loop: only the cancellation itself can have closed the response
        return await server.disconnected(timeout=1), cancelled_at

    assert _disconnect_latency(*run(model, main)) < ABORT_BOUND


def test_aborting_the_signal_ends_the_stream_and_closes_the_response(
    server: MockProviderServer,
) -> None:
    _hanging(server)
    model = model_for(server)
    signal = AbortSignal()

    async def main() -> tuple[float, float]:
        aborted_at = 0.0
        with pytest.raises(Aborted):
            async for chunk in model.stream(HI, signal=signal):
                if isinstance(chunk, TextDelta):
                    aborted_at = time.monotonic()
                    asyncio.get_running_loop().call_soon(signal.abort, "user")
        # on the live loop: only the abort itself can have closed the response
        return await server.disconnected(timeout=1), aborted_at

    disconnected_at, aborted_at = run(model, main)
    assert aborted_at > 0
    assert _disconnect_latency(disconnected_at, aborted_at) < ABORT_BOUND
