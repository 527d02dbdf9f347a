"""The OpenAI-compatible adapter over real HTTP against the loopback MockProviderServer."""

from __future__ import annotations

import email.utils
import itertools
import json
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
from agent_runtime.llm.providers.openai import (
    OpenAICompatibleModel,
    deepseek,
    groq,
    llama_cpp,
    mistral,
    ollama,
    openai,
    openai_compatible,
    openrouter,
    together,
)
from agent_runtime.llm.types import (
    ChatRequest,
    FinishDelta,
    StreamChunk,
    TextDelta,
    ToolSpec,
)
from agent_runtime.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from agent_runtime.testing.mock_server import MockProviderServer, MockResponse
from agent_runtime.testing.scripted import ScriptedTurn
from tests.agent_runtime.llm.helpers import adapter, assemble, assembled, collect, generate

model_for = partial(adapter, "openai")


def frame(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    """One `chat.completion.chunk` payload."""
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [choice], **extra}


def usage_frame(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": usage}


# -- answers --------------------------------------------------------------------------------------


def test_thinking_is_received_and_dropped_when_sent_back(server: MockProviderServer) -> None:
    server.enqueue(ScriptedTurn(text="42", thinking="6 times 7"), "ok")
    model = model_for(server)
    first = assembled(model)
    assert first.message.content == [ThinkingContent(thinking="6 times 7"), TextContent(text="42")]
    follow_up = ChatRequest(
        messages=[UserMessage(content="6*7?"), first.message, UserMessage(content="sure?")]
    )
    generate(model, follow_up)
    assistant = server.requests[1].json["messages"][1]
    assert assistant == {"role": "assistant", "content": "42"}


# -- provider quirks ------------------------------------------------------------------------------


def test_fragments_repeating_index_id_and_name_make_one_call_each(
    server: MockProviderServer,
) -> None:
    def fragment(index: int, call_id: str, name: str, arguments: str) -> dict[str, Any]:
        call = {"index": index, "id": call_id, "type": "function"}
        function = {"name": name, "arguments": arguments}
        return frame({"tool_calls": [{**call, "function": function}]})

    events = [
        fragment(0, "call_a", "get", '{"ci'),
        fragment(1, "call_b", "get", '{"city"'),
        fragment(0, "call_a", "get", 'ty": "Oslo"}'),
        fragment(1, "call_b", "get", ': "Rome"}'),
        frame({}, "tool_calls"),
        "[DONE]",
    ]
    server.enqueue(MockResponse(events=events))
    response = assembled(model_for(server))
    assert response.message.tool_calls == [
        ToolCall(id="call_a", name="get", arguments={"city": "Oslo"}),
        ToolCall(id="call_b", name="get", arguments={"city": "Rome"}),
    ]


def test_fragments_without_index_continue_the_call_named_by_id(
    server: MockProviderServer,
) -> None:
    def head(call_id: str) -> dict[str, Any]:
        call = {"id": call_id, "type": "function", "function": {"name": "add", "arguments": ""}}
        return frame({"tool_calls": [call]})

    def tail(arguments: str) -> dict[str, Any]:
        return frame({"tool_calls": [{"function": {"arguments": arguments}}]})

    events = [
        head("call_1"),
        tail('{"a": '),
        tail("1}"),
        head("call_2"),
        tail('{"a": 2}'),
        frame({}, "tool_calls"),
        "[DONE]",
    ]
    server.enqueue(MockResponse(events=events))
    response = assembled(model_for(server))
    assert response.message.tool_calls == [
        ToolCall(id="call_1", name="add", arguments={"a": 1}),
        ToolCall(id="call_2", name="add", arguments={"a": 2}),
    ]


def test_stop_on_a_tool_call_turn_comes_out_as_tool_use(server: MockProviderServer) -> None:
    function = {"name": "f", "arguments": "{}"}
    call = {"index": 0, "id": "c1", "type": "function", "function": function}
    server.enqueue(
        MockResponse(events=[frame({"tool_calls": [call]}), frame({}, "stop"), "[DONE]"])
    )
    response = assembled(model_for(server))
    assert response.stop_reason == "tool_use" and response.raw_finish_reason == "stop"
    assert response.message.tool_calls == [ToolCall(id="c1", name="f")]


def test_a_stream_without_a_usage_chunk_gets_an_estimate_marked_as_one(
    server: MockProviderServer,
) -> None:
    answer = "hi there, " * 10  # 100 characters: 25 tokens at 4 characters a token
    events = [frame({"content": answer}), frame({}, "stop"), "[DONE]"]
    server.enqueue(MockResponse(events=events))
    response = assembled(model_for(server))
    sent = len(json.dumps(server.requests[-1].json, separators=(",", ":")))
    assert response.text == answer and response.usage.estimated
    assert response.usage.output_tokens == 25
    assert response.usage.input_tokens == -(-sent // 4)
    assert response.message.usage == response.usage


def test_reported_usage_is_not_marked_estimated(server: MockProviderServer) -> None:
    server.enqueue("hi", "hi")
    model = model_for(server)
    assert not assembled(model).usage.estimated
    assert not generate(model).usage.estimated


def test_a_completion_without_usage_gets_an_estimate(server: MockProviderServer) -> None:
    body = {"choices": [{"index": 0, "message": {"content": "abcd" * 3}, "finish_reason": "stop"}]}
    server.enqueue(MockResponse(body=body))
    usage = generate(model_for(server)).usage
    assert usage.estimated and usage.output_tokens == 3 and usage.input_tokens > 0


def test_usage_in_the_finish_chunk_is_read(server: MockProviderServer) -> None:
    usage = {"prompt_tokens": 43, "completion_tokens": 1, "total_tokens": 44}
    last = frame({}, "length", usage=usage)  # llama.cpp puts usage in the finish chunk
    server.enqueue(MockResponse(events=[frame({"content": "x"}), last, "[DONE]"]))
    response = assembled(model_for(server))
    assert response.usage == Usage(input_tokens=43, output_tokens=1)
    assert response.stop_reason == "length"


def test_usage_chunk_after_the_finish_chunk_is_kept(server: MockProviderServer) -> None:
    events = [frame({"content": "x"}), frame({}, "stop"), usage_frame(5, 1, 2), "[DONE]"]
    server.enqueue(MockResponse(events=events))
    model = model_for(server)
    chunks = collect(model)
    assert isinstance(chunks[-1], FinishDelta)
    assert assemble(chunks, model.info).usage == Usage(
        input_tokens=5, output_tokens=1, cached_input_tokens=2
    )


def test_done_without_a_finish_reason_is_stop(server: MockProviderServer) -> None:
    server.enqueue(MockResponse(events=[frame({"content": "hi"}), "[DONE]"]))
    chunks = collect(model_for(server))
    assert chunks[-1] == FinishDelta(reason="stop", raw_reason=None)


def test_a_finish_reason_then_close_without_done_finishes(server: MockProviderServer) -> None:
    server.enqueue(MockResponse(events=[frame({"content": "hi"}), frame({}, "stop")]))
    chunks = collect(model_for(server))
    assert chunks[-1] == FinishDelta(reason="stop", raw_reason="stop")
    assert sum(isinstance(c, FinishDelta) for c in chunks) == 1


def test_content_filter_finishes_as_error(server: MockProviderServer) -> None:
    events = [frame({"content": "partial"}), frame({}, "content_filter"), "[DONE]"]
    server.enqueue(MockResponse(events=events))
    response = assembled(model_for(server))
    assert response.stop_reason == "error" and response.raw_finish_reason == "content_filter"
    assert response.text == "partial"


def test_the_reasoning_field_is_thinking_too(server: MockProviderServer) -> None:
    events = [frame({"reasoning": "hmm"}), frame({"content": "ok"}), frame({}, "stop"), "[DONE]"]
    server.enqueue(MockResponse(events=events))
    response = assembled(model_for(server))
    assert response.message.content == [ThinkingContent(thinking="hmm"), TextContent(text="ok")]


SPLIT_EVENTS: list[Any] = [
    frame({"role": "assistant", "content": ""}),
    frame({"content": "Héllo ✓ "}),
    frame({"content": "wörld"}),
    frame({"tool_calls": [{"index": 0, "id": "call_a", "function": {"name": "read"}}]}),
    frame({"tool_calls": [{"index": 0, "function": {"arguments": '{"path": "/tmp/ä'}}]}),
    frame({"tool_calls": [{"index": 1, "id": "call_b", "function": {"name": "list"}}]}),
    frame({"tool_calls": [{"index": 0, "function": {"arguments": '.txt"}'}}]}),
    frame({"tool_calls": [{"index": 1, "function": {"arguments": '{"dir": '}}]}),
    frame({"tool_calls": [{"index": 1, "function": {"arguments": '"."}'}}]}),
    frame({}, "tool_calls"),
    usage_frame(31, 17, 8),
    "[DONE]",
]
SPLIT_BODY = b"".join(
    f"data: {e if isinstance(e, str) else json.dumps(e, ensure_ascii=False)}\n\n".encode()
    for e in SPLIT_EVENTS
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cuts=st.sets(st.integers(min_value=1, max_value=len(SPLIT_BODY) - 1), max_size=15))
def test_any_split_of_the_sse_body_assembles_the_same_answer(
    server: MockProviderServer, cuts: set[int]
) -> None:
    offsets = [0, *sorted(cuts), len(SPLIT_BODY)]
    pieces = [SPLIT_BODY[a:b] for a, b in itertools.pairwise(offsets)]
    server.enqueue(MockResponse(raw=pieces))
    response = assembled(model_for(server))
    assert response.message.content == [
        TextContent(text="Héllo ✓ wörld"),
        ToolCall(id="call_a", name="read", arguments={"path": "/tmp/ä.txt"}),
        ToolCall(id="call_b", name="list", arguments={"dir": "."}),
    ]
    assert response.stop_reason == "tool_use"
    assert response.usage == Usage(input_tokens=31, output_tokens=17, cached_input_tokens=8)


# -- errors ---------------------------------------------------------------------------------------


def error_body(message: str, kind: str | None, code: Any = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


IN_30S = "<an HTTP date 30 s from now>"  # filled in when the test runs

ERROR_ROWS: list[tuple[str, int, Any, dict[str, str], type[LLMError], bool, Any]] = [
    (
        "400",
        400,
        error_body("Invalid value for 'temperature'", "invalid_request_error", "invalid_value"),
        {},
        InvalidRequestError,
        False,
        None,
    ),
    (
        "400-context",
        400,
        error_body(
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130532 tokens. Please reduce the length of the messages.",
            "invalid_request_error",
            "context_length_exceeded",
        ),
        {},
        ContextLengthExceededError,
        False,
        None,
    ),
    (
        "401",
        401,
        error_body(
            "Incorrect API key provided: sk-test.", "invalid_request_error", "invalid_api_key"
        ),
        {},
        AuthenticationError,
        False,
        None,
    ),
    (
        "403",
        403,
        error_body(
            "Country, region, or territory not supported",
            "request_forbidden",
            "unsupported_country_region_territory",
        ),
        {},
        PermissionDeniedError,
        False,
        None,
    ),
    (
        "404",
        404,
        error_body(
            "The model `gpt-9` does not exist or you do not have access to it.",
            "invalid_request_error",
            "model_not_found",
        ),
        {},
        ModelNotFoundError,
        False,
        None,
    ),
    (
        "429-retry-after-ms",
        429,
        error_body("Rate limit reached for requests", "requests", "rate_limit_exceeded"),
        {"retry-after-ms": "1500"},
        RateLimitError,
        True,
        1.5,
    ),
    (
        "429-retry-after-seconds",
        429,
        error_body("Rate limit reached for tokens", "tokens", "rate_limit_exceeded"),
        {"retry-after": "7"},
        RateLimitError,
        True,
        7.0,
    ),
    (
        "429-retry-after-date",
        429,
        error_body("Rate limit reached for requests", "requests", "rate_limit_exceeded"),
        {"retry-after": IN_30S},
        RateLimitError,
        True,
        pytest.approx(30, abs=2),
    ),
    (
        "429-quota",
        429,
        error_body(
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            "insufficient_quota",
        ),
        {},
        QuotaExceededError,
        False,
        None,
    ),
    (
        "402-openrouter-credits",
        402,
        {"error": {"code": 402, "message": "Insufficient credits. Add more using /credits"}},
        {},
        QuotaExceededError,
        False,
        None,
    ),
    (
        "500",
        500,
        error_body("The server had an error while processing your request.", "server_error"),
        {},
        ProviderError,
        True,
        None,
    ),
    (
        "503",
        503,
        error_body("The engine is currently overloaded, please try again later.", "server_error"),
        {},
        ProviderError,
        True,
        None,
    ),
]


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
@pytest.mark.parametrize(
    ("status", "body", "headers", "error", "retryable", "retry_after"),
    [row[1:] for row in ERROR_ROWS],
    ids=[row[0] for row in ERROR_ROWS],
)
def test_error_statuses_map_to_llm_errors(
    server: MockProviderServer,
    streaming: bool,
    status: int,
    body: Any,
    headers: dict[str, str],
    error: type[LLMError],
    retryable: bool,
    retry_after: Any,
) -> None:
    if headers.get("retry-after") == IN_30S:
        headers = {"retry-after": email.utils.formatdate(time.time() + 30, usegmt=True)}
    server.enqueue(MockResponse(status=status, body=body, headers=headers))
    model = model_for(server)
    with pytest.raises(error) as caught:
        collect(model) if streaming else generate(model)
    assert type(caught.value) is error
    assert caught.value.status == status
    assert caught.value.provider == "openai_compatible"
    assert caught.value.retryable is retryable
    assert caught.value.request_id == "req_mock"
    assert caught.value.retry_after == retry_after


def test_an_error_event_inside_a_200_stream_raises(server: MockProviderServer) -> None:
    events = [
        frame({"content": "Hel"}),
        error_body("The server had an error while processing your request.", "server_error"),
    ]
    server.enqueue(MockResponse(events=events))
    seen: list[StreamChunk] = []
    with pytest.raises(ProviderError, match="server had an error") as caught:
        collect(model_for(server), into=seen)
    assert seen == [TextDelta(text="Hel")]
    assert caught.value.retryable and caught.value.request_id == "req_mock"


def test_an_error_body_with_status_200_raises(server: MockProviderServer) -> None:
    server.enqueue(MockResponse(status=200, body=error_body("overloaded", "server_error")))
    with pytest.raises(ProviderError, match="overloaded"):
        generate(model_for(server))


# -- abort ----------------------------------------------------------------------------------------


# -- the request on the wire ----------------------------------------------------------------------


def test_the_request_carries_the_expected_wire_fields(server: MockProviderServer) -> None:
    server.enqueue("ok")
    request = ChatRequest(
        system="You are terse.",
        messages=[
            UserMessage(
                content=[TextContent(text="look"), ImageContent(data="AAA", mime_type="image/png")]
            ),
            AssistantMessage(
                content=[
                    ThinkingContent(thinking="hm", signature="sig"),
                    ToolCall(id="call_1", name="read", arguments={"p": 1}),
                ],
                stop_reason="tool_use",
            ),
            ToolResultMessage(
                tool_call_id="call_1", tool_name="read", content=[TextContent(text="data")]
            ),
        ],
        tools=[ToolSpec(name="read", description="Read.")],
        tool_choice="required",
        temperature=0.3,
        max_output_tokens=256,
        reasoning="xhigh",
    )
    generate(model_for(server), request)
    sent = server.requests[0]
    assert sent.method == "POST" and sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    body = sent.json
    assert body["model"] == "gpt-test"
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool"]
    assert body["messages"][0]["content"] == "You are terse."
    assert body["messages"][1]["content"][1]["image_url"]["url"] == "data:image/png;base64,AAA"
    assert body["messages"][2]["tool_calls"][0]["function"] == {
        "name": "read",
        "arguments": '{"p": 1}',
    }
    assert "reasoning_content" not in body["messages"][2]
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "data"}
    assert body["tools"][0]["function"]["name"] == "read"
    assert body["tool_choice"] == "required"
    assert body["temperature"] == 0.3
    assert body["max_tokens"] == 256 and "max_completion_tokens" not in body
    assert body["reasoning_effort"] == "high"


def test_the_openai_host_sends_max_completion_tokens(server: MockProviderServer) -> None:
    server.enqueue("ok")
    model = openai("gpt-5", api_key="sk-x", base_url=server.base_url("openai"))
    generate(model, ChatRequest(messages=[UserMessage(content="hi")], max_output_tokens=64))
    body = server.requests[0].json
    assert body["max_completion_tokens"] == 64 and "max_tokens" not in body
    assert body["model"] == "gpt-5" and model.info.provider == "openai"


def test_a_streamed_request_asks_for_usage(server: MockProviderServer) -> None:
    server.enqueue("ok")
    collect(model_for(server))
    sent = server.requests[0]
    assert sent.json["stream"] is True
    assert sent.json["stream_options"] == {"include_usage": True}
    assert sent.headers["accept"] == "text/event-stream"


def test_custom_headers_are_sent(server: MockProviderServer) -> None:
    server.enqueue("ok")
    generate(model_for(server, headers={"HTTP-Referer": "https://example.org"}))
    assert server.requests[0].headers["http-referer"] == "https://example.org"


# -- keys -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
def test_a_missing_key_fails_before_any_request(
    server: MockProviderServer, monkeypatch: pytest.MonkeyPatch, streaming: bool
) -> None:
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    model = groq("llama-3.3-70b", base_url=server.base_url("openai"))
    with pytest.raises(AuthenticationError, match="GROQ_API_KEY") as caught:
        collect(model) if streaming else generate(model)
    assert caught.value.provider == "groq"
    assert server.requests == []


def test_keyless_local_servers_send_no_authorization(
    server: MockProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.enqueue("one", "two", "three")
    generate(ollama("qwen3", base_url=server.base_url("openai")))
    generate(llama_cpp(base_url=server.base_url("openai")))
    generate(model_for(server, api_key=None, api_key_env=None))
    assert all("authorization" not in r.headers for r in server.requests)
    assert server.requests[1].json["model"] == "local"


@pytest.mark.parametrize(
    ("factory", "url", "provider", "env"),
    [
        (openai, "https://api.openai.com/v1", "openai", "OPENAI_API_KEY"),
        (groq, "https://api.groq.com/openai/v1", "groq", "GROQ_API_KEY"),
        (together, "https://api.together.xyz/v1", "together", "TOGETHER_API_KEY"),
        (mistral, "https://api.mistral.ai/v1", "mistral", "MISTRAL_API_KEY"),
        (deepseek, "https://api.deepseek.com/v1", "deepseek", "DEEPSEEK_API_KEY"),
        (openrouter, "https://openrouter.ai/api/v1", "openrouter", "OPENROUTER_API_KEY"),
    ],
)
def test_named_hosts_know_their_url_and_key_variable(
    server: MockProviderServer,
    monkeypatch: pytest.MonkeyPatch,
    factory: Callable[..., OpenAICompatibleModel],
    url: str,
    provider: str,
    env: str,
) -> None:
    model = factory("some-model")
    assert (model.base_url, model.info.provider) == (url, provider)
    server.enqueue("ok")
    monkeypatch.setenv(env, f"key-for-{provider}")
    generate(factory("some-model", base_url=server.base_url("openai")))
    assert server.requests[0].headers["authorization"] == f"Bearer key-for-{provider}"


def test_local_hosts_default_urls() -> None:
    assert ollama("qwen3").base_url == "http://127.0.0.1:11434/v1"
    assert llama_cpp().base_url == "http://127.0.0.1:8080/v1"


# -- models and capabilities ----------------------------------------------------------------------


def test_a_generic_server_gets_no_key_from_the_environment_by_default(
    server: MockProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    server.enqueue("hi")
    model = openai_compatible(server.base_url("openai"), "m")
    generate(model)
    assert "authorization" not in server.requests[0].headers
