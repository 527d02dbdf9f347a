"""`halved`: the context transform at half budget, for the one retry of a context overflow."""

from __future__ import annotations

import asyncio

from agent_runtime.context import make_transform
from agent_runtime.llm import ChatRequest
from agent_runtime.loop import validate_transcript
from agent_runtime.loop._overflow import halved
from agent_runtime.messages import (
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)


def user(text: str) -> UserMessage:
    return UserMessage(content=text)


def transcript() -> list[Message]:
    """A task, a tool round of 200 characters, and a question: 10 + 200 + 100 + 4 characters."""
    return [
        user("task " + "t" * 5),
        AssistantMessage(content=[ToolCall(id="c1", name="read", arguments={})]),
        ToolResultMessage(
            tool_call_id="c1", tool_name="read", content=[TextContent(text="r" * 196)]
        ),
        user("q" * 100),
        user("last"),
    ]


def test_a_budgeted_transform_is_called_with_half_its_budget() -> None:
    transform = make_transform(max_chars=400)
    request = ChatRequest(messages=transform(transcript()))
    assert len(request.messages) == 5  # 314 characters fit 400
    smaller = asyncio.run(halved(request, transform))
    assert smaller is not None
    assert [m.text for m in smaller.messages] == ["task ttttt", "q" * 100, "last"]
    assert validate_transcript(smaller.messages) == []


def test_an_async_budgeted_transform_is_awaited() -> None:
    inner = make_transform(max_chars=400)

    async def transform(messages: list[Message], *, budget: float = 1.0) -> list[Message]:
        return inner(messages, budget=budget)

    smaller = asyncio.run(halved(ChatRequest(messages=transcript()), transform))
    assert smaller is not None and len(smaller.messages) == 3


def test_a_plain_transform_gets_its_output_cut_to_half_its_size() -> None:
    smaller = asyncio.run(halved(ChatRequest(messages=transcript()), lambda messages: messages))
    assert smaller is not None
    assert [m.text for m in smaller.messages] == ["q" * 100, "last"]  # newest units, <= 157


def test_nothing_to_drop_gives_none() -> None:
    request = ChatRequest(messages=[user("only " + "x" * 100)])
    assert asyncio.run(halved(request, make_transform(max_chars=1000))) is None
    assert asyncio.run(halved(request, lambda messages: messages)) is None


def test_the_other_fields_of_the_request_are_kept() -> None:
    request = ChatRequest(messages=transcript(), system="be brief", temperature=0.5)
    smaller = asyncio.run(halved(request, lambda messages: messages))
    assert smaller is not None
    assert (smaller.system, smaller.temperature) == ("be brief", 0.5)
