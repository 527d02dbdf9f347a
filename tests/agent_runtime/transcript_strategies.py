"""hypothesis strategies for valid tool transcripts (shared by the transcript and context tests)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from agent_runtime.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

_words = st.text(alphabet="abc xyz", max_size=30)


def user(text: str = "hi") -> UserMessage:
    return UserMessage(content=text, timestamp=0.0)


def assistant(text: str = "", *calls: ToolCall) -> AssistantMessage:
    content: list[Any] = [TextContent(text=text)] if text else []
    return AssistantMessage(content=[*content, *calls], timestamp=0.0)


def call(call_id: str, name: str = "echo", **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def result(call_id: str, text: str = "ok", name: str = "echo") -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id, tool_name=name, content=[TextContent(text=text)], timestamp=0.0
    )


@st.composite
def valid_transcripts(draw: st.DrawFn, max_turns: int = 8) -> list[Message]:
    """Transcripts that pass `validate_transcript`: unique call ids, every call answered once
    before the next assistant message (results in any order, user messages may interleave)."""
    messages: list[Message] = []
    if draw(st.booleans()):
        messages.append(UserMessage(content=draw(_words), timestamp=0.0))
    next_id = 0
    for _ in range(draw(st.integers(0, max_turns))):
        kind = draw(st.sampled_from(["user", "image_user", "text", "thinking", "tools"]))
        if kind == "user":
            messages.append(UserMessage(content=draw(_words), timestamp=0.0))
        elif kind == "image_user":
            image = ImageContent(data="aGk=", mime_type="image/png")
            messages.append(UserMessage(content=[TextContent(text="see"), image], timestamp=0.0))
        elif kind == "text":
            messages.append(assistant(draw(_words) or "ok"))
        elif kind == "thinking":
            block = ThinkingContent(thinking=draw(_words))
            messages.append(AssistantMessage(content=[block, TextContent(text="x")], timestamp=0.0))
        else:
            count = draw(st.integers(1, 4))
            calls = [call(f"c{next_id + i}", q=draw(_words)) for i in range(count)]
            next_id += count
            messages.append(assistant(draw(_words), *calls))
            order = draw(st.permutations([c.id for c in calls]))
            for position, call_id in enumerate(order):
                messages.append(result(call_id, draw(_words)))
                if position < len(order) - 1 and draw(st.integers(0, 9)) == 0:
                    messages.append(UserMessage(content="meanwhile", timestamp=0.0))
    return messages
