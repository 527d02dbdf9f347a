"""An agent's history as a transcript: prompts as messages, and results for unpaired calls."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agent_runtime.messages import (
    AssistantMessage,
    Message,
    TextContent,
    ToolResultMessage,
    UserMessage,
)

MESSAGE_TYPES = (UserMessage, AssistantMessage, ToolResultMessage)


def as_messages(value: str | Message | Sequence[Message]) -> list[Message]:
    """A prompt as messages: a str becomes one UserMessage.

    Raises:
        TypeError: anything else than a str, a message or a list of messages.
    """
    if isinstance(value, str):
        return [UserMessage(content=value)]
    if isinstance(value, MESSAGE_TYPES):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(m, MESSAGE_TYPES) for m in value):
        return list(value)
    raise TypeError(f"expected a str, a Message or a list of Messages, not {type(value).__name__}")


def unknown_result(call_id: str, name: str, reason: str) -> ToolResultMessage:
    """The result of a call whose outcome nobody knows (its run was cut off)."""
    return ToolResultMessage(
        tool_call_id=call_id,
        tool_name=name,
        content=[TextContent(text=f"Not completed: the run ended ({reason}).")],
        details={"outcome": "unknown", "cancelled": True},
        is_error=True,
    )


def pair_dangling_calls(messages: Iterable[Message], reason: str) -> list[Message]:
    """Results for the tool calls of `messages` left without one (a run cut off by a crash or
    a stopped loop), to be appended so the history stays a valid transcript."""
    messages = list(messages)
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)}
    return [
        unknown_result(call.id, call.name, reason)
        for message in messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
        if call.id not in answered
    ]


def repaired(messages: Sequence[Message], reason: str) -> list[Message]:
    """`messages` with an `outcome="unknown"` result inserted after each assistant message's
    results for every call of it left unpaired (a history rebuilt after a crash)."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)}
    out: list[Message] = []
    missing: list[Message] = []
    for message in messages:
        if missing and not isinstance(message, ToolResultMessage):
            out.extend(missing)
            missing = []
        out.append(message)
        if isinstance(message, AssistantMessage):
            missing = [
                unknown_result(c.id, c.name, reason)
                for c in message.tool_calls
                if c.id not in answered
            ]
    out.extend(missing)
    return out
