"""MockProviderServer speaks each provider's wire format as the provider's official SDK reads it.

The official `anthropic`, `openai` and `google-genai` clients (dev-only dependencies) are
pointed at the mock: what they parse must be what the mock meant, headers included. Their
clients build responses leniently, so each body and stream event is also validated strictly
against the SDK's own pydantic model of the documented shape.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from anthropic.types import Message as AnthropicMessage
from anthropic.types import RawMessageStreamEvent
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types
from openai.types import Model as OpenAIModel
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import TypeAdapter

from agent_runtime.llm import ChatRequest, InvalidRequestError, RateLimitError, gemini
from agent_runtime.messages import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
    UserMessage,
)
from agent_runtime.testing import MockProviderServer, MockResponse, ScriptedTurn

SIGNATURE = base64.b64encode(b"opaque thought state").decode()
TURN = ScriptedTurn(
    chunks=["The answer ", "is 4."],
    thinking="2+2",
    thinking_signature=SIGNATURE,
    tool_calls=[ToolCall(id="call_1", name="check", arguments={"n": 4})],
    usage=Usage(input_tokens=12, output_tokens=8, cached_input_tokens=4),
)
TEXT_ONLY = ScriptedTurn(chunks=["Hello", " there"], usage=Usage(input_tokens=3, output_tokens=2))
RATE_LIMITED = ScriptedTurn(error=RateLimitError("slow down", retry_after=7.0))
HELLO = [{"role": "user", "content": "hi"}]


@pytest.fixture
def server() -> Iterator[MockProviderServer]:
    with MockProviderServer(model="m") as mock:
        yield mock


def sse_payloads(
    server: MockProviderServer, path: str, body: dict[str, Any], **headers: str
) -> list[Any]:
    """The JSON `data:` payloads of one streamed answer, read off the wire without an SDK."""
    response = httpx.post(server.url + path, json=body, headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    return [
        json.loads(line.removeprefix("data:").strip())
        for line in response.text.splitlines()
        if line.startswith("data:") and line.removeprefix("data:").strip() != "[DONE]"
    ]


# -- Anthropic Messages ---------------------------------------------------------------------------


@pytest.fixture
def claude(server: MockProviderServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test-key", base_url=server.url, max_retries=0)


def test_anthropic_sdk_reads_the_request_id_the_mock_sends(
    server: MockProviderServer, claude: anthropic.Anthropic
) -> None:
    server.enqueue(TEXT_ONLY, TEXT_ONLY, RATE_LIMITED)
    message = claude.messages.create(model="m", max_tokens=64, messages=HELLO)
    assert message._request_id == "req_mock"
    with claude.messages.stream(model="m", max_tokens=64, messages=HELLO) as stream:
        stream.until_done()
        assert stream.request_id == "req_mock"
    with pytest.raises(anthropic.RateLimitError) as info:
        claude.messages.create(model="m", max_tokens=64, messages=HELLO)
    assert info.value.request_id == "req_mock"
    assert info.value.response.headers["retry-after"] == "7"


def test_anthropic_message_validates_against_the_sdk_model(
    server: MockProviderServer, claude: anthropic.Anthropic
) -> None:
    server.enqueue(TURN)
    raw = claude.messages.with_raw_response.create(model="m", max_tokens=64, messages=HELLO)
    message = AnthropicMessage.model_validate(raw.http_response.json())
    assert [block.type for block in message.content] == ["thinking", "text", "tool_use"]
    assert message.content[0].signature == SIGNATURE
    assert message.stop_reason == "tool_use"
    assert message.usage.input_tokens + (message.usage.cache_read_input_tokens or 0) == 12


def test_anthropic_stream_events_validate_and_assemble_into_the_same_message(
    server: MockProviderServer, claude: anthropic.Anthropic
) -> None:
    server.enqueue(TURN, TURN, TURN)
    body = {"model": "m", "max_tokens": 64, "messages": HELLO, "stream": True}
    events = sse_payloads(server, "/v1/messages", body, **{"anthropic-version": "2023-06-01"})
    adapter: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
    kinds = [adapter.validate_python(e).type for e in events if e["type"] != "ping"]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    with claude.messages.stream(model="m", max_tokens=64, messages=HELLO) as stream:
        streamed = stream.get_final_message()
    whole = claude.messages.create(model="m", max_tokens=64, messages=HELLO)
    assert blocks(streamed) == blocks(whole)
    assert streamed.stop_reason == whole.stop_reason == "tool_use"


def blocks(message: AnthropicMessage) -> list[dict[str, Any]]:
    # The stream helper adds `parsed_output` (structured outputs) to its text blocks.
    return [block.model_dump(exclude={"parsed_output"}) for block in message.content]


def test_anthropic_error_body_and_model_list_parse(
    server: MockProviderServer, claude: anthropic.Anthropic
) -> None:
    server.enqueue(RATE_LIMITED)
    with pytest.raises(anthropic.RateLimitError) as info:
        claude.messages.create(model="m", max_tokens=64, messages=HELLO)
    assert info.value.body == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "slow down"},
        "request_id": "req_mock",
    }
    assert [model.id for model in claude.models.list()] == server.models


# -- OpenAI Chat Completions ----------------------------------------------------------------------


@pytest.fixture
def gpt(server: MockProviderServer) -> openai.OpenAI:
    return openai.OpenAI(api_key="test-key", base_url=server.base_url("openai"), max_retries=0)


def test_openai_completion_and_chunks_validate_against_the_sdk_models(
    server: MockProviderServer, gpt: openai.OpenAI
) -> None:
    server.enqueue(TURN, TURN)
    raw = gpt.chat.completions.with_raw_response.create(model="m", messages=HELLO)
    completion = ChatCompletion.model_validate(raw.http_response.json())
    assert raw.request_id == "req_mock"
    assert completion.choices[0].finish_reason == "tool_calls"
    body = {
        "model": "m",
        "messages": HELLO,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    chunks = [
        ChatCompletionChunk.model_validate(e)
        for e in sse_payloads(server, "/v1/chat/completions", body)
    ]
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 20


def test_openai_sdk_stream_error_and_model_list_parse(
    server: MockProviderServer, gpt: openai.OpenAI
) -> None:
    server.enqueue(TEXT_ONLY, RATE_LIMITED)
    stream = gpt.chat.completions.create(model="m", messages=HELLO, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Hello there"
    with pytest.raises(openai.RateLimitError) as info:
        gpt.chat.completions.create(model="m", messages=HELLO)
    assert info.value.request_id == "req_mock"
    listed = httpx.get(server.base_url("openai") + "/models").json()["data"]
    assert [OpenAIModel.model_validate(entry).id for entry in listed] == server.models
    assert [model.id for model in gpt.models.list()] == server.models


# -- Gemini generateContent -----------------------------------------------------------------------


@pytest.fixture
def google(server: MockProviderServer) -> genai.Client:
    options = genai_types.HttpOptions(base_url=server.url, api_version="v1beta")
    return genai.Client(api_key="test-key", http_options=options)


def test_gemini_response_and_stream_validate_against_the_sdk_models(
    server: MockProviderServer, google: genai.Client
) -> None:
    server.enqueue(TURN, TURN)
    raw = httpx.post(server.url + "/v1beta/models/m:generateContent", json={"contents": []})
    # extra="forbid" and base64 `bytes`: the SDK's model is as strict as the API's schema.
    response = genai_types.GenerateContentResponse.model_validate_json(raw.text)
    parts = response.candidates[0].content.parts
    assert parts is not None
    assert [p.thought_signature for p in parts if p.thought_signature] == [b"opaque thought state"]
    for event in sse_payloads(
        server, "/v1beta/models/m:streamGenerateContent?alt=sse", {"contents": []}
    ):
        genai_types.GenerateContentResponse.model_validate_json(json.dumps(event))


def test_gemini_sdk_reads_generate_stream_errors_and_models(
    server: MockProviderServer, google: genai.Client
) -> None:
    server.enqueue(TURN, TURN, RATE_LIMITED)
    whole = google.models.generate_content(model="m", contents="hi")
    assert whole.function_calls is not None and whole.function_calls[0].args == {"n": 4}
    assert whole.usage_metadata is not None and whole.usage_metadata.prompt_token_count == 12
    streamed = list(google.models.generate_content_stream(model="m", contents="hi"))
    assert "".join(chunk.text or "" for chunk in streamed if chunk.function_calls is None) == (
        "The answer is 4."
    )
    with pytest.raises(genai_errors.ClientError) as info:
        google.models.generate_content(model="m", contents="hi")
    assert info.value.code == 429 and info.value.status == "RESOURCE_EXHAUSTED"
    assert [model.name for model in google.models.list()] == ["models/m", "models/m-large"]


def test_gemini_mock_refuses_a_thought_signature_that_is_not_base64(
    server: MockProviderServer,
) -> None:
    server.enqueue("unused")
    parts = [{"text": "42", "thoughtSignature": "sig-A"}]
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "6*7?"}]},
            {"role": "model", "parts": parts},
        ]
    }
    response = httpx.post(server.url + "/v1beta/models/m:generateContent", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert "contents[1].parts[0].thought_signature" in error["message"]
    assert "Base64 decoding failed" in error["message"]


def test_gemini_adapter_sending_a_bad_signature_gets_an_invalid_request_error(
    server: MockProviderServer,
) -> None:
    server.enqueue("unused")
    model = gemini("m", "test-key", base_url=server.base_url("gemini"))
    history = [
        UserMessage(content="6*7?"),
        AssistantMessage(
            content=[ThinkingContent(thinking="", signature="not base64!"), TextContent(text="42")],
            provider="gemini",
        ),
        UserMessage(content="ok"),
    ]
    with pytest.raises(InvalidRequestError, match="thought_signature"):
        model.generate_sync(ChatRequest(messages=history))


@pytest.mark.parametrize("signature", ["sig-A", "a", "a b=", "ab=="])
def test_gemini_mock_will_not_serve_a_scripted_signature_that_is_not_base64(
    server: MockProviderServer, google: genai.Client, signature: str
) -> None:
    server.enqueue(ScriptedTurn(text="42", thinking_signature=signature))
    with pytest.raises(genai_errors.ClientError) as info:
        google.models.generate_content(model="m", contents="hi")
    assert info.value.code == 400
    assert f"thinking_signature {signature!r} is not base64" in str(info.value.message)


@pytest.mark.parametrize("signature", ["c2ln", "c2lnLUE", "c2lnLUE=", "-_-_", "+/+/", ""])
def test_gemini_mock_accepts_every_base64_form_the_api_accepts(
    server: MockProviderServer, signature: str
) -> None:
    server.enqueue(MockResponse(turn=ScriptedTurn(text="ok")))
    body = {
        "contents": [{"role": "model", "parts": [{"text": "a", "thoughtSignature": signature}]}]
    }
    response = httpx.post(server.url + "/v1beta/models/m:generateContent", json=body)
    assert response.status_code == 200, response.text
    genai_types.Part.model_validate_json(json.dumps({"thoughtSignature": signature}))
