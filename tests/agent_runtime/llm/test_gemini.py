"""The Gemini adapter over real HTTP, against the mock server's Gemini wire format."""

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
    NetworkError,
    PermissionDeniedError,
    ProviderError,
    QuotaExceededError,
    RateLimitError,
)
from agent_runtime.llm.providers.gemini import SYNTHETIC_CALL_ID_PREFIX, gemini
from agent_runtime.llm.types import (
    ChatRequest,
    FinishDelta,
    StreamChunk,
    TextDelta,
    ToolSpec,
)
from agent_runtime.messages import (
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from agent_runtime.testing.mock_server import MockProviderServer, MockResponse
from agent_runtime.testing.scripted import ScriptedTurn
from tests.agent_runtime.llm.helpers import (
    HI,
    adapter,
    assemble,
    assembled,
    collect,
    generate,
    run,
)

PATH = "/v1beta/models/gemini-test"

model_for = partial(adapter, "gemini")


def event(*parts: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    """One streamed GenerateContentResponse."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], **extra}


def google_error(code: int, status: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status, **extra}}


# -- answers -----------------------------------------------------------------------------------


def test_generate_and_stream_post_to_their_own_methods(server: MockProviderServer) -> None:
    server.enqueue("whole", "streamed")
    model = model_for(server)
    generate(model)
    collect(model)
    assert [r.path for r in server.requests] == [
        f"{PATH}:generateContent",
        f"{PATH}:streamGenerateContent",
    ]
    assert [r.query for r in server.requests] == [{}, {"alt": ["sse"]}]


def test_sse_frames_split_at_arbitrary_bytes_still_parse(server: MockProviderServer) -> None:
    body = (
        b'data: {"candidates":[{"content":{"parts":'
        b'[{"functionCall":{"name":"f","args":{"a":1}}}]}}]}'
        b"\r\n\r\n"
        b'data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"g","args":{}}}]},'
        b'"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":4}}'
        b"\r\n\r\n"
    )
    pieces = [body[i : i + 7] for i in range(0, len(body), 7)]
    server.enqueue(MockResponse(raw=pieces))
    response = assembled(model_for(server))
    assert [(c.name, c.arguments) for c in response.message.tool_calls] == [
        ("f", {"a": 1}),
        ("g", {}),
    ]
    assert response.usage == Usage(input_tokens=3, output_tokens=4)


def test_usage_in_a_chunk_after_the_finish_reason_counts(server: MockProviderServer) -> None:
    server.enqueue(
        MockResponse(
            events=[
                event({"text": "done"}, finish="STOP"),
                {"usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 2}},
            ]
        )
    )
    model = model_for(server)
    chunks = collect(model)
    assert isinstance(chunks[-1], FinishDelta)
    assert sum(isinstance(c, FinishDelta) for c in chunks) == 1
    assert assemble(chunks, model.info).usage == Usage(input_tokens=9, output_tokens=2)


@pytest.mark.parametrize(
    ("raw", "reason"), [("MAX_TOKENS", "length"), ("SAFETY", "error"), ("RECITATION", "error")]
)
def test_finish_reasons_map_to_stop_reasons(
    server: MockProviderServer, raw: str, reason: str
) -> None:
    server.enqueue(MockResponse(events=[event({"text": "partial"}, finish=raw)]))
    response = assembled(model_for(server))
    assert (response.stop_reason, response.raw_finish_reason, response.text) == (
        reason,
        raw,
        "partial",
    )


def test_a_blocked_prompt_ends_with_an_error_stop(server: MockProviderServer) -> None:
    server.enqueue(MockResponse(body={"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}}))
    response = generate(model_for(server))
    assert response.stop_reason == "error"
    assert response.raw_finish_reason == "PROMPT_BLOCKED:PROHIBITED_CONTENT"


# -- thinking, signatures and ids across turns -------------------------------------------------


def test_thinking_is_streamed_and_sent_back_with_its_signature(
    server: MockProviderServer,
) -> None:
    server.enqueue(
        ScriptedTurn(text="42", thinking="Compute.", thinking_signature="c2lnLUE="), "thanks"
    )
    model = model_for(server)
    request = ChatRequest(messages=[UserMessage(content="6*7?")], reasoning="high")
    first = assembled(model)
    assert first.message.content == [
        ThinkingContent(thinking="Compute.", signature="c2lnLUE="),
        TextContent(text="42"),
    ]
    follow_up = ChatRequest(
        messages=[*request.messages, first.message, UserMessage(content="ok")], reasoning="high"
    )
    generate(model, follow_up)
    sent = server.requests[1].json
    assert sent["contents"][1] == {
        "role": "model",
        "parts": [
            {"text": "Compute.", "thought": True},
            {"text": "42", "thoughtSignature": "c2lnLUE="},
        ],
    }
    assert sent["generationConfig"]["thinkingConfig"] == {
        "thinkingBudget": 16384,
        "includeThoughts": True,
    }


def test_thought_signatures_on_text_and_function_call_parts_are_echoed(
    server: MockProviderServer,
) -> None:
    server.enqueue(
        MockResponse(
            events=[
                event({"text": "summary", "thought": True}),
                event({"text": "I will ", "thoughtSignature": "U0lHLVRFWFQ="}),
                event({"text": "look."}),
                event(
                    {
                        "functionCall": {"name": "read", "args": {"p": 1}},
                        "thoughtSignature": "U0lHLUZD",
                    }
                ),
                event({"functionCall": {"name": "read", "args": {"p": 2}}}),
                event({"text": "", "thoughtSignature": "U0lHLUVORA=="}, finish="STOP"),
            ]
        ),
        "ok",
    )
    model = model_for(server)
    answer = assembled(model)
    results = [
        ToolResultMessage(tool_call_id=c.id, tool_name=c.name, content=[TextContent(text="x")])
        for c in answer.message.tool_calls
    ]
    generate(model, ChatRequest(messages=[*HI.messages, answer.message, *results]))
    assert server.requests[1].json["contents"][1]["parts"] == [
        {"text": "summary", "thought": True},
        {"text": "I will look.", "thoughtSignature": "U0lHLVRFWFQ="},
        {"functionCall": {"name": "read", "args": {"p": 1}}, "thoughtSignature": "U0lHLUZD"},
        {"functionCall": {"name": "read", "args": {"p": 2}}},
        {"text": "", "thoughtSignature": "U0lHLUVORA=="},
    ]


def test_calls_without_ids_get_synthesized_ids_that_are_never_sent_back(
    server: MockProviderServer,
) -> None:
    server.enqueue(
        MockResponse(
            events=[
                event({"functionCall": {"name": "weather", "args": {"city": "Oslo"}}}),
                event({"functionCall": {"name": "time", "args": {}}}, finish="STOP"),
            ]
        ),
        "It is sunny.",
    )
    model = model_for(server)
    answer = assembled(model)
    ids = [c.id for c in answer.message.tool_calls]
    assert len(set(ids)) == 2
    assert all(i.startswith(SYNTHETIC_CALL_ID_PREFIX) for i in ids)
    results = [
        ToolResultMessage(
            tool_call_id=ids[0], tool_name="weather", content=[TextContent(text="sun")]
        ),
        ToolResultMessage(
            tool_call_id=ids[1], tool_name="time", content=[TextContent(text="?")], is_error=True
        ),
    ]
    generate(model, ChatRequest(messages=[*HI.messages, answer.message, *results]))
    contents = server.requests[1].json["contents"]
    assert contents[1]["parts"] == [
        {"functionCall": {"name": "weather", "args": {"city": "Oslo"}}},
        {"functionCall": {"name": "time", "args": {}}},
    ]
    assert contents[2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "weather", "response": {"result": "sun"}}},
            {"functionResponse": {"name": "time", "response": {"error": "?"}}},
        ],
    }


def test_real_call_ids_are_echoed_on_calls_and_responses(server: MockProviderServer) -> None:
    server.enqueue(ScriptedTurn(tool_calls=[ToolCall(id="g-7", name="f", arguments={})]), "ok")
    model = model_for(server)
    answer = generate(model)
    result = ToolResultMessage(tool_call_id="g-7", tool_name="f", content=[TextContent(text="1")])
    generate(model, ChatRequest(messages=[*HI.messages, answer.message, result]))
    contents = server.requests[1].json["contents"]
    assert contents[1]["parts"] == [{"functionCall": {"name": "f", "args": {}, "id": "g-7"}}]
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "f", "response": {"result": "1"}, "id": "g-7"}}
    ]


# -- the request on the wire -------------------------------------------------------------------


def test_request_carries_key_system_tools_choice_limits_and_schema(
    server: MockProviderServer,
) -> None:
    server.enqueue("{}")
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    tool = ToolSpec(
        name="read",
        description="Read a file.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "additionalProperties": False,
        },
    )
    request = ChatRequest(
        messages=[UserMessage(content="go")],
        system="You are terse.",
        tools=[tool],
        tool_choice="read",
        temperature=0.3,
        max_output_tokens=256,
        reasoning="low",
        response_schema=schema,
    )
    generate(model_for(server), request)
    sent = server.requests[0]
    assert sent.headers["x-goog-api-key"] == "g-test"
    assert "key" not in sent.query
    assert sent.json == {
        "contents": [{"role": "user", "parts": [{"text": "go"}]}],
        "systemInstruction": {"parts": [{"text": "You are terse."}]},
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "read",
                        "description": "Read a file.",
                        "parametersJsonSchema": tool.parameters,
                    }
                ]
            }
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["read"]}},
        "generationConfig": {
            "temperature": 0.3,
            "maxOutputTokens": 256,
            "thinkingConfig": {"thinkingBudget": 2048, "includeThoughts": True},
            "responseMimeType": "application/json",
            "responseJsonSchema": schema,
        },
    }


def test_the_key_is_read_from_gemini_then_google_env_vars(
    server: MockProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.enqueue("a", "b")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "from-google")
    model = model_for(server, api_key=None)
    generate(model)
    monkeypatch.setenv("GEMINI_API_KEY", "from-gemini")
    generate(model)
    assert [r.headers["x-goog-api-key"] for r in server.requests] == ["from-google", "from-gemini"]


def test_list_models_follows_pages_and_skips_models_that_cannot_generate() -> None:
    pages = {
        None: {
            "models": [{"name": "models/a", "supportedGenerationMethods": ["generateContent"]}],
            "nextPageToken": "p2",
        },
        "p2": {
            "models": [{"name": "models/embed", "supportedGenerationMethods": ["embedContent"]}]
        },
    }

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=pages[request.url.params.get("pageToken")])

    model = gemini("x", "k", base_url="http://gemini.test", transport=httpx.MockTransport(answer))
    assert run(model, model.list_models) == ["a"]


# -- errors ------------------------------------------------------------------------------------

RETRY_INFO = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}
CONTEXT = "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
QUOTA = "You exceeded your current quota, please check your plan and billing details."
KEY_INVALID = {
    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
    "reason": "API_KEY_INVALID",
    "domain": "googleapis.com",
}


def _http_date(seconds: float) -> str:
    return email.utils.formatdate(time.time() + seconds, usegmt=True)


ERROR_ROWS: list[tuple[str, int, dict[str, Any], dict[str, str], type[LLMError], bool, Any]] = [
    (
        "400",
        400,
        google_error(400, "INVALID_ARGUMENT", "bad"),
        {},
        InvalidRequestError,
        False,
        None,
    ),
    (
        "400-context",
        400,
        google_error(400, "INVALID_ARGUMENT", CONTEXT),
        {},
        ContextLengthExceededError,
        False,
        None,
    ),
    (
        "400-key",
        400,
        google_error(400, "INVALID_ARGUMENT", "API key not valid.", details=[KEY_INVALID]),
        {},
        AuthenticationError,
        False,
        None,
    ),
    ("401", 401, google_error(401, "UNAUTHENTICATED", "no"), {}, AuthenticationError, False, None),
    (
        "403",
        403,
        google_error(403, "PERMISSION_DENIED", "no"),
        {},
        PermissionDeniedError,
        False,
        None,
    ),
    ("404", 404, google_error(404, "NOT_FOUND", "no model"), {}, ModelNotFoundError, False, None),
    (
        "429-ms",
        429,
        google_error(429, "RESOURCE_EXHAUSTED", "slow down"),
        {"retry-after-ms": "1500"},
        RateLimitError,
        True,
        1.5,
    ),
    (
        "429-seconds",
        429,
        google_error(429, "RESOURCE_EXHAUSTED", "slow down"),
        {"retry-after": "7"},
        RateLimitError,
        True,
        7.0,
    ),
    (
        "429-date",
        429,
        google_error(429, "RESOURCE_EXHAUSTED", "slow down"),
        {"retry-after": "<http date in 30 s>"},
        RateLimitError,
        True,
        "about 30",
    ),
    (
        "429-retry-info",
        429,
        google_error(429, "RESOURCE_EXHAUSTED", QUOTA, details=[RETRY_INFO]),
        {},
        RateLimitError,
        True,
        12.0,
    ),
    (
        "429-list-wrapped",
        429,
        [google_error(429, "RESOURCE_EXHAUSTED", "slow down", details=[RETRY_INFO])],  # type: ignore[list-item]
        {},
        RateLimitError,
        True,
        12.0,
    ),
    (
        "429-quota",
        429,
        google_error(429, "RESOURCE_EXHAUSTED", QUOTA),
        {},
        QuotaExceededError,
        False,
        None,
    ),
    ("500", 500, google_error(500, "INTERNAL", "oops"), {}, ProviderError, True, None),
    ("503", 503, google_error(503, "UNAVAILABLE", "overloaded"), {}, ProviderError, True, None),
]


@pytest.mark.parametrize("mode", ["generate", "stream"])
@pytest.mark.parametrize(
    ("status", "body", "headers", "kind", "retryable", "retry_after"),
    [row[1:] for row in ERROR_ROWS],
    ids=[row[0] for row in ERROR_ROWS],
)
def test_error_statuses_map_to_errors_with_their_facts(
    server: MockProviderServer,
    mode: str,
    status: int,
    body: Any,
    headers: dict[str, str],
    kind: type[LLMError],
    retryable: bool,
    retry_after: Any,
) -> None:
    if headers.get("retry-after") == "<http date in 30 s>":
        headers = {"retry-after": _http_date(30)}
    server.enqueue(MockResponse(status=status, body=body, headers=headers))
    call = generate if mode == "generate" else collect
    with pytest.raises(kind) as caught:
        call(model_for(server))
    error = caught.value
    assert type(error) is kind
    assert (error.provider, error.status, error.retryable) == ("gemini", status, retryable)
    assert error.request_id == "req_mock"
    if retry_after == "about 30":
        assert error.retry_after is not None and 25 <= error.retry_after <= 31
    else:
        assert error.retry_after == retry_after


@pytest.mark.parametrize("wrapped", [False, True], ids=["object", "list-wrapped"])
def test_an_error_event_inside_a_200_stream_raises_mapped(
    server: MockProviderServer, wrapped: bool
) -> None:
    error = google_error(503, "UNAVAILABLE", "The model is overloaded.")
    server.enqueue(MockResponse(events=[event({"text": "Hel"}), [error] if wrapped else error]))
    seen: list[StreamChunk] = []
    with pytest.raises(ProviderError) as caught:
        collect(model_for(server), into=seen)
    assert caught.value.retryable and caught.value.status == 503
    assert caught.value.request_id == "req_mock"
    assert seen == [TextDelta(text="Hel")]


def test_a_scripted_in_stream_error_is_rendered_and_mapped(server: MockProviderServer) -> None:
    server.enqueue(ScriptedTurn(chunks=["a"], error=RateLimitError("busy", retry_after=3)))
    with pytest.raises(RateLimitError) as caught:
        collect(model_for(server))
    assert caught.value.retry_after == 3.0


def test_a_stream_that_ends_without_finish_reason_is_a_network_error(
    server: MockProviderServer,
) -> None:
    server.enqueue(MockResponse(events=[event({"text": "Hel"}), event({"text": "lo"})]))
    seen: list[StreamChunk] = []
    with pytest.raises(NetworkError) as caught:
        collect(model_for(server), into=seen)
    assert caught.value.retryable and caught.value.request_id == "req_mock"
    assert not any(isinstance(c, FinishDelta) for c in seen)


# -- abort -------------------------------------------------------------------------------------


def test_generate_sync_works_without_an_event_loop(server: MockProviderServer) -> None:
    server.enqueue(ScriptedTurn(text="sync", usage=Usage(input_tokens=2, output_tokens=1)))
    response = model_for(server).generate_sync(HI, timeout=5)
    assert (response.text, response.usage.total_tokens) == ("sync", 3)
