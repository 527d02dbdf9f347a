"""The OpenAI adapter against the mock server's `llama_cpp` dialect: what llama-cpp-python's
server does differently (issue 15, items 1-5), so `make test` covers it without the server.
tests/live/ checks the same against the real one."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from agent_runtime.llm import RetryingModel
from agent_runtime.llm._error_map import MAX_MESSAGE_CHARS
from agent_runtime.llm.errors import (
    ContextLengthExceededError,
    InvalidRequestError,
    ModelNotFoundError,
    NetworkError,
    ProviderError,
)
from agent_runtime.llm.types import ChatRequest, FinishDelta, ToolSpec, UsageDelta
from agent_runtime.messages import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agent_runtime.testing._llama_cpp import rejection
from agent_runtime.testing.mock_server import MockProviderServer, MockResponse
from agent_runtime.testing.scripted import ScriptedTurn
from tests.agent_runtime.llm.helpers import (
    adapter,
    assembled,
    collect,
    debug_logs,
    generate,
    run,
)
from tests.agent_runtime.otel_capture import run_traced

ADD = ToolSpec(
    name="add",
    description="Add two numbers.",
    parameters={"type": "object", "properties": {"a": {"type": "integer"}}},
)
AFTER_A_TOOL_CALL = ChatRequest(
    messages=[
        UserMessage(content="add 1"),
        AssistantMessage(content=[ToolCall(id="c1", name="add", arguments={"a": 1})]),
        ToolResultMessage(tool_call_id="c1", tool_name="add", content=[TextContent(text="1")]),
    ],
    tools=[ADD],
)


@pytest.fixture
def llama() -> Iterator[MockProviderServer]:
    with MockProviderServer(dialect="llama_cpp") as server:
        yield server


def post(server: MockProviderServer, body: dict[str, object]) -> httpx.Response:
    return httpx.post(f"{server.base_url('openai')}/chat/completions", json=body, timeout=5)


# -- the dialect is the server's ----------------------------------------------------------------


def test_the_dialect_rejects_a_null_content_with_a_long_validation_dump(
    llama: MockProviderServer,
) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    assistant = {"role": "assistant", "content": None, "tool_calls": [call]}
    for stream in (False, True):
        response = post(llama, {"model": "m", "stream": stream, "messages": [assistant]})
        assert response.status_code == 500
        message = response.json()["error"]["message"]
        assert message.startswith("7 validation errors:") and len(message) > 1500


def test_the_dialect_streams_an_error_as_an_empty_200(llama: MockProviderServer) -> None:
    llama.enqueue(ScriptedTurn(error=ContextLengthExceededError("too long")))
    response = post(llama, {"model": "m", "stream": True, "messages": []})
    assert response.status_code == 200 and response.content == b""
    assert response.headers["content-type"] == "text/event-stream"


def test_the_dialect_sends_no_usage_chunk(llama: MockProviderServer) -> None:
    llama.enqueue("hi")
    body = {"model": "m", "stream": True, "stream_options": {"include_usage": True}}
    response = post(llama, {**body, "messages": []})
    assert b'"usage"' not in response.content and b"[DONE]" in response.content


def test_an_unknown_tool_choice_is_rejected_as_the_server_does() -> None:
    body = {"tools": [{"type": "function", "function": {"name": "add"}}]}
    choice = {"type": "function", "function": {"name": "nope"}}
    rejected = rejection({**body, "tool_choice": choice})
    assert rejected is not None
    assert rejected[0]["error"]["message"] == "Tool with name 'nope' not found in tools"
    named = {"type": "function", "function": {"name": "add"}}
    assert rejection({**body, "tool_choice": named}) is None


# -- 1: an assistant message with tool calls and no text --------------------------------------


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
def test_a_tool_call_without_text_is_sent_with_empty_content(
    llama: MockProviderServer, streaming: bool
) -> None:
    llama.enqueue("the sum is 1")
    model = adapter("openai", llama)
    response = (
        assembled(model, AFTER_A_TOOL_CALL) if streaming else generate(model, AFTER_A_TOOL_CALL)
    )
    assert response.text == "the sum is 1"
    assert llama.requests[-1].json["messages"][1]["content"] == ""


# -- 2: streams without usage --------------------------------------------------------------------


def test_a_stream_without_usage_reports_an_estimate_marked_estimated(
    llama: MockProviderServer,
) -> None:
    llama.enqueue(ScriptedTurn(text="x" * 40, chunks=["x" * 20, "x" * 20]))
    chunks = collect(adapter("openai", llama))
    usage = [c for c in chunks if isinstance(c, UsageDelta)]
    assert len(usage) == 1 and isinstance(chunks[-1], FinishDelta)
    assert usage[0].usage.estimated
    assert usage[0].usage.output_tokens == 10 and usage[0].usage.input_tokens > 0


# -- 3: errors as an empty 200 stream ---------------------------------------------------------


def test_an_empty_stream_is_asked_again_without_streaming_for_the_real_error() -> None:
    with MockProviderServer(dialect="llama_cpp", max_request_chars=200) as server:
        long = ChatRequest(messages=[UserMessage(content="word " * 100)])
        with pytest.raises(ContextLengthExceededError) as caught:
            collect(adapter("openai", server), long)
    assert not caught.value.retryable
    assert [r.json.get("stream", False) for r in server.requests] == [True, False]


def test_an_unknown_tool_choice_streamed_is_an_invalid_request_not_retried(
    llama: MockProviderServer,
) -> None:
    request = ChatRequest(messages=[UserMessage(content="hi")], tools=[ADD], tool_choice="nope")
    model = RetryingModel(adapter("openai", llama), base_delay=0.0)

    async def read() -> None:
        async for _ in model.stream(request):
            pass

    with pytest.raises(InvalidRequestError, match="not found in tools"):
        run(model.inner, read)
    assert len(llama.requests) == 2  # the stream, its repeat without streaming; no retry


def test_an_empty_stream_whose_repeat_answers_streams_that_answer(
    llama: MockProviderServer,
) -> None:
    llama.enqueue(MockResponse(events=[]), "answered without streaming")
    response = assembled(adapter("openai", llama))
    assert response.text == "answered without streaming"


def test_an_empty_stream_without_an_answer_is_a_provider_error_not_retried(
    llama: MockProviderServer,
) -> None:
    empty = {"choices": [{"index": 0, "message": {"content": ""}, "finish_reason": "stop"}]}
    llama.enqueue(MockResponse(events=[]), MockResponse(body=empty))
    with pytest.raises(ProviderError) as caught:
        collect(adapter("openai", llama))
    assert not isinstance(caught.value, NetworkError)
    assert caught.value.code == "empty_stream" and not caught.value.retryable


def test_a_server_error_on_the_repeat_is_not_retried(llama: MockProviderServer) -> None:
    failing = {"error": {"message": "", "type": "internal_server_error"}}
    llama.enqueue(MockResponse(events=[]), MockResponse(status=500, body=failing))
    with pytest.raises(ProviderError) as caught:
        collect(adapter("openai", llama))
    assert caught.value.status == 500 and not caught.value.retryable


# -- 4: bad requests as HTTP 500 --------------------------------------------------------------


def test_a_500_validation_dump_is_a_short_invalid_request_error(
    llama: MockProviderServer,
) -> None:
    dump = rejection({"messages": [{"role": "assistant", "content": None}]})
    assert dump is not None
    llama.enqueue(MockResponse(status=500, body=dump[0]))
    with pytest.raises(InvalidRequestError) as caught:
        generate(adapter("openai", llama))
    error = caught.value
    assert type(error) is InvalidRequestError and not error.retryable and error.status == 500
    assert error.message.startswith("7 validation errors: {'type': 'literal_error'")
    reason = error.message.removesuffix(" [internal_server_error]")
    assert len(reason) == MAX_MESSAGE_CHARS and reason.endswith("...")
    assert len(json.dumps(error.body)) > 1500  # the whole dump stays available


def test_an_unknown_tool_choice_is_an_invalid_request(llama: MockProviderServer) -> None:
    request = ChatRequest(messages=[UserMessage(content="hi")], tools=[ADD], tool_choice="nope")
    with pytest.raises(InvalidRequestError, match="'nope' not found in tools"):
        generate(adapter("openai", llama), request)


# -- 5: a base_url without /v1 ------------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
def test_not_found_names_the_url_that_was_called(
    llama: MockProviderServer, streaming: bool
) -> None:
    model = adapter("openai", llama)
    without_v1 = type(model)("m", base_url=llama.url, api_key="k")
    with pytest.raises(ModelNotFoundError) as caught:
        collect(without_v1) if streaming else generate(without_v1)
    assert f"POST {llama.url}/chat/completions" in caught.value.message
    assert caught.value.message.startswith("Not Found")


# -- issue 35.14: a bare 500 names the options the server is known to reject -----------------------


def test_the_dialect_answers_a_required_tool_choice_with_a_bare_500(
    llama: MockProviderServer,
) -> None:
    tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
    body = {"model": "m", "messages": [], "tools": tools, "tool_choice": "required"}
    response = post(llama, body)
    assert response.status_code == 500 and response.json()["error"]["message"] == ""
    streamed = post(llama, {**body, "stream": True})
    assert streamed.status_code == 200 and streamed.content == b""


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
def test_a_bare_500_names_the_tool_choice_the_server_rejects_and_is_not_retried(
    llama: MockProviderServer, streaming: bool
) -> None:
    request = ChatRequest(messages=[UserMessage(content="hi")], tools=[ADD], tool_choice="required")
    retries: list[object] = []
    model = RetryingModel(
        adapter("openai", llama), base_delay=0.0, on_retry=lambda a, d, e: retries.append(e)
    )

    async def call() -> None:
        if streaming:
            async for _ in model.stream(request):
                pass
        else:
            await model.generate(request)

    with pytest.raises(ProviderError) as caught:
        run(model.inner, call)
    error = caught.value
    assert "tool_choice='required'" in error.message and "no reason" in error.message
    assert "docs/providers.md" in error.message
    assert not error.retryable and retries == []


def test_a_bare_500_without_a_rejected_option_is_left_as_it_was(
    llama: MockProviderServer,
) -> None:
    llama.enqueue(MockResponse(status=500, body={"error": {"message": "", "type": "x"}}))
    with pytest.raises(ProviderError) as caught:
        generate(adapter("openai", llama))
    assert caught.value.retryable and "known to reject" not in caught.value.message


# -- issue 35.13: a shape the server cannot stream is learned once ---------------------------------

AUTO_AFTER_A_TOOL_CALL = AFTER_A_TOOL_CALL.model_copy(update={"tool_choice": "auto"})


def test_the_dialect_cannot_stream_auto_after_a_tool_result(llama: MockProviderServer) -> None:
    llama.enqueue("answered")
    tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
    messages = [
        {"role": "user", "content": "add"},
        {"role": "assistant", "content": "", "tool_calls": []},
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
    ]
    body = {"model": "m", "messages": messages, "tools": tools, "tool_choice": "auto"}
    streamed = post(llama, {**body, "stream": True})
    assert streamed.status_code == 200 and streamed.content == b""
    assert post(llama, body).json()["choices"][0]["message"]["content"] == "answered"


def test_auto_after_a_tool_result_is_learned_and_sent_without_streaming_from_then_on(
    llama: MockProviderServer,
) -> None:
    llama.enqueue("one", "two", "three")
    model = adapter("openai", llama)
    with debug_logs() as logs:
        answers = [assembled(model, AUTO_AFTER_A_TOOL_CALL).text for _ in range(3)]
    assert answers == ["one", "two", "three"]
    # the first turn costs two requests (the empty stream, then without streaming); later ones one
    assert [r.json.get("stream", False) for r in llama.requests] == [True, False, False, False]
    events = [e["event"] for e in logs if e["event"].startswith("llm.stream.fallback.")]
    assert events == ["llm.stream.fallback.learned"] + ["llm.stream.fallback.used"] * 2
    learned = next(e for e in logs if e["event"] == "llm.stream.fallback.learned")
    assert (learned["tool_choice"], learned["after_tool_result"]) == ("auto", True)
    assert learned["log_level"] == "debug"


def test_what_is_learned_is_one_instances_and_one_shapes(llama: MockProviderServer) -> None:
    llama.enqueue("one", "first turn streams", "other instance")
    model = adapter("openai", llama)
    assembled(model, AUTO_AFTER_A_TOOL_CALL)
    first_turn = ChatRequest(
        messages=[UserMessage(content="add 1")], tools=[ADD], tool_choice="auto"
    )
    assert assembled(model, first_turn).text == "first turn streams"  # another shape: streamed
    assert assembled(adapter("openai", llama), AUTO_AFTER_A_TOOL_CALL).text == "other instance"
    assert [r.json.get("stream", False) for r in llama.requests] == [True, False, True, True, False]


def test_an_empty_stream_whose_repeat_fails_teaches_nothing() -> None:
    with MockProviderServer(dialect="llama_cpp", max_request_chars=400) as server:
        long = AUTO_AFTER_A_TOOL_CALL.model_copy(
            update={"messages": [*AUTO_AFTER_A_TOOL_CALL.messages, UserMessage(content="w " * 300)]}
        )
        model = adapter("openai", server)
        for _ in range(2):
            with pytest.raises(ContextLengthExceededError):
                collect(model, long)
    assert [r.json.get("stream", False) for r in server.requests] == [True, False] * 2


def test_learned_and_used_fallbacks_are_counted() -> None:
    captured = run_traced(
        """
        import asyncio
        from agent_runtime.llm import ChatRequest, openai_compatible
        from agent_runtime.testing.mock_server import MockProviderServer
        request = ChatRequest.model_validate_json(REQUEST)

        async def turns(model):
            for _ in range(3):
                async for _chunk in model.stream(request):
                    pass

        with MockProviderServer(["one", "two", "three"], dialect="llama_cpp") as server:
            asyncio.run(turns(openai_compatible(server.base_url("openai"), "m")))
        """.replace("REQUEST", repr(AUTO_AFTER_A_TOOL_CALL.model_dump_json()))
    )
    metric = "agent_runtime.llm.stream_fallbacks"
    (learned,) = captured.points(
        metric, event="learned", **{"gen_ai.provider.name": "openai_compatible"}
    )
    (used,) = captured.points(metric, event="used")
    assert (learned["value"], used["value"]) == (1, 2)
