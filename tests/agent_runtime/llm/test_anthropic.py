"""The Anthropic adapter over real HTTP, against the mock server's Anthropic wire format."""

from __future__ import annotations

import email.utils
import time
from functools import partial
from typing import Any

import httpx
import pytest

from agent_runtime.llm.errors import (
    AuthenticationError,
    ContextLengthExceededError,
    InvalidRequestError,
    LLMError,
    ModelNotFoundError,
    PermissionDeniedError,
    ProviderError,
    QuotaExceededError,
    RateLimitError,
)
from agent_runtime.llm.providers.anthropic import anthropic
from agent_runtime.llm.types import (
    ChatRequest,
    FinishDelta,
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
from agent_runtime.testing.mock_server import MockProviderServer, MockResponse
from agent_runtime.testing.scripted import ScriptedTurn
from tests.agent_runtime.llm.helpers import HI, adapter, assembled, collect, generate, run

model_for = partial(adapter, "anthropic")


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


# -- abort --------------------------------------------------------------------------------------
