"""The adapter against the real server: answers, streams, usage, models (issue 15)."""

from __future__ import annotations

import asyncio

import pytest

from agent_runtime.llm import ChatRequest, ModelDirectory, OpenAICompatibleModel, ToolSpec
from agent_runtime.llm.types import FinishDelta, TextDelta, UsageDelta
from agent_runtime.messages import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from tests.agent_runtime.llm.helpers import debug_logs
from tests.live.helpers import SECONDS, ask, assemble, chunks_of

ADD = ToolSpec(
    name="add",
    description="Add two integers.",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)


def test_prompt_and_generate_give_text_and_reported_usage(model: OpenAICompatibleModel) -> None:
    assert model.prompt_sync("Say hello.", timeout=SECONDS).strip()
    response = model.generate_sync(ask("Name a colour."), timeout=SECONDS)
    assert response.text.strip() and response.stop_reason in ("stop", "length")
    usage = response.usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0 and not usage.estimated
    assert response.message.usage == usage and response.request_id


def test_a_stream_has_several_chunks_and_the_shape_of_generate(
    model: OpenAICompatibleModel,
) -> None:
    request = ask("Count from one to ten in words.", max_output_tokens=20)
    chunks = chunks_of(model, request)
    assert sum(isinstance(c, TextDelta) for c in chunks) >= 2
    assert isinstance(chunks[-1], FinishDelta)
    assert sum(isinstance(c, FinishDelta) for c in chunks) == 1
    streamed = assemble(model, chunks)
    generated = model.generate_sync(request, timeout=SECONDS)
    for response in (streamed, generated):
        assert [type(b) for b in response.message.content] == [TextContent]
        assert response.text.strip() and response.stop_reason in ("stop", "length")
        assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert streamed.text == generated.text  # temperature 0: the same answer both ways


def test_a_stream_without_usage_from_the_server_reports_an_estimate(
    model: OpenAICompatibleModel,
) -> None:
    usage = [c for c in chunks_of(model, ask("Say hi.")) if isinstance(c, UsageDelta)]
    assert len(usage) == 1  # the server sends none, even asked with stream_options
    assert usage[0].usage.estimated
    assert usage[0].usage.input_tokens > 0 and usage[0].usage.output_tokens > 0


def test_list_models_returns_the_served_model(
    model: OpenAICompatibleModel, served_model: str
) -> None:
    assert isinstance(model, ModelDirectory)
    assert model.list_models_sync(timeout=SECONDS) == [served_model]

    async def listed() -> list[str]:
        try:
            return await model.list_models()
        finally:
            await model.aclose()

    assert asyncio.run(listed()) == [served_model]


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
def test_an_answer_to_a_tool_call_without_text_is_accepted(
    model: OpenAICompatibleModel, streaming: bool
) -> None:
    call = ToolCall(id="call_1", name="add", arguments={"a": 2, "b": 3})
    request = ChatRequest(
        messages=[
            UserMessage(content="What is 2 plus 3?"),
            AssistantMessage(content=[call]),  # no text: sent with content ""
            ToolResultMessage(
                tool_call_id="call_1", tool_name="add", content=[TextContent(text="5")]
            ),
        ],
        tools=[ADD],
        max_output_tokens=16,
        temperature=0.0,
    )
    if streaming:
        response = assemble(model, chunks_of(model, request))
    else:
        response = model.generate_sync(request, timeout=SECONDS)
    assert response.stop_reason in ("stop", "length", "tool_use")
    assert response.message.content  # text or another call: an answer, not a 500


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
def test_a_forced_tool_call_comes_back_as_a_tool_call(
    model: OpenAICompatibleModel, streaming: bool
) -> None:
    request = ask("What is 2 plus 3? Use the add tool.", tools=[ADD], tool_choice="add")
    request = request.model_copy(update={"max_output_tokens": 48})
    if streaming:
        response = assemble(model, chunks_of(model, request))
    else:
        response = model.generate_sync(request, timeout=SECONDS)
    (call,) = response.message.tool_calls
    assert call.name == "add" and set(call.arguments) == {"a", "b"}
    assert all(isinstance(value, int) for value in call.arguments.values())
    assert response.stop_reason == "tool_use"


def test_auto_tool_choice_is_answered_in_both_chat_formats(
    model: OpenAICompatibleModel, mode: str
) -> None:
    """chatml-function-calling cannot stream `auto` (an empty 200 stream): the adapter asks
    again without streaming; the GGUF's own template streams it."""
    request = ask("What is 2 plus 3?", tools=[ADD], tool_choice="auto", max_output_tokens=48)
    response = assemble(model, chunks_of(model, request))
    assert response.message.content and response.stop_reason in ("stop", "length", "tool_use")


def test_a_shape_the_server_cannot_stream_is_learned_and_not_streamed_again(
    model: OpenAICompatibleModel, mode: str
) -> None:
    """chatml-function-calling answers a streamed `auto` after a tool result with an empty 200
    stream when the model goes on calling (issue 35.13): the first such turn is asked again
    without streaming and the shape learned; the next goes without streaming at once, so the
    server sees one request for it, not two. The GGUF's own template streams it: nothing
    is learned, both turns stream."""
    call = ToolCall(id="call_1", name="add", arguments={"a": 2, "b": 3})
    request = ChatRequest(
        messages=[
            UserMessage(content="What is 2 plus 3?"),
            AssistantMessage(content=[call]),
            ToolResultMessage(
                tool_call_id="call_1", tool_name="add", content=[TextContent(text="5")]
            ),
        ],
        tools=[ADD],
        tool_choice="auto",
        max_output_tokens=32,
        temperature=0.0,
    )
    with debug_logs() as logs:
        first = assemble(model, chunks_of(model, request))
        second = assemble(model, chunks_of(model, request))
    assert first.message.content and second.message.content
    events = [e["event"] for e in logs if e["event"].startswith("llm.stream.")]
    if events[:1] == ["llm.stream.empty"]:  # the server could not stream the first turn
        assert events == [
            "llm.stream.empty",
            "llm.stream.fallback.learned",
            "llm.stream.fallback.used",
        ]
    else:
        assert events == []  # streamed both times (the model answered with text)
