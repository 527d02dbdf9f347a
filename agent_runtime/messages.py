"""Message and content models: the one transcript vocabulary of the loop, the LLM layer and memory.

Every model here is a frozen pydantic model (`extra="forbid"`) and round-trips through JSON exactly:
`Model.model_validate_json(m.model_dump_json()) == m`. Content blocks are discriminated by `type`,
messages by `role`; parse untyped data with `MessageAdapter` / `MessageListAdapter`.

Text is always valid Unicode: a lone surrogate in any string of a message or content block
(prompts, tool results, model output, tool-call arguments and details, nested values included),
such as `"q \\udcff"` from `os.listdir` for a file name that is not UTF-8, is replaced by U+FFFD
(`"q \\ufffd"`) when the model is made. So every message encodes as UTF-8: it can be sent to
any provider, stored in session memory and serialized to JSON.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter

from agent_runtime._text import replace_lone_surrogates, replace_lone_surrogates_in

__all__ = [
    "AnyContent",
    "AssistantContent",
    "AssistantMessage",
    "Content",
    "ImageContent",
    "Message",
    "MessageAdapter",
    "MessageListAdapter",
    "StopReason",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolResult",
    "ToolResultMessage",
    "Trust",
    "Usage",
    "UserMessage",
]

StopReason = Literal["stop", "length", "tool_use", "error", "aborted"]
"""Why an assistant message ended."""

Trust = Literal["trusted", "untrusted"]
"""Whether a tool result's content may be treated as instructions (`trusted`) or only as data."""


_Text = Annotated[str, AfterValidator(replace_lone_surrogates)]
"""A string of a message: lone surrogates replaced by U+FFFD."""

_JsonObject = Annotated[dict[str, Any], AfterValidator(replace_lone_surrogates_in)]
"""A JSON object of a message (arguments, details): lone surrogates replaced in every string."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextContent(_Frozen):
    """A block of plain text."""

    type: Literal["text"] = "text"
    text: _Text


class ImageContent(_Frozen):
    """An inline image: base64-encoded `data` of the given `mime_type` (not decoded or checked)."""

    type: Literal["image"] = "image"
    data: _Text
    mime_type: _Text


class ThinkingContent(_Frozen):
    """A model's reasoning block.

    `signature` is the provider's opaque token for replaying the block; `redacted` marks a block
    whose text the provider withheld (the signature, if any, still has to be sent back).
    """

    type: Literal["thinking"] = "thinking"
    thinking: _Text
    signature: _Text | None = None
    redacted: bool = False


class ToolCall(_Frozen):
    """The model's request to run tool `name` with JSON `arguments`; `id` pairs it with a result."""

    type: Literal["tool_call"] = "tool_call"
    id: _Text
    name: _Text
    arguments: _JsonObject = Field(default_factory=dict)
    raw_arguments: _Text | None = None
    """The arguments as streamed, kept when they were not complete, valid JSON objects."""


Content = Annotated[TextContent | ImageContent, Field(discriminator="type")]
"""What a user message or a tool result may contain: text and images."""

AssistantContent = Annotated[TextContent | ThinkingContent | ToolCall, Field(discriminator="type")]
"""What an assistant message may contain: text, thinking and tool calls."""

AnyContent = Annotated[
    TextContent | ImageContent | ThinkingContent | ToolCall, Field(discriminator="type")
]
"""Any content block."""


def _join_text(blocks: list[Any]) -> str:
    return "".join(b.text for b in blocks if isinstance(b, TextContent))


class Usage(_Frozen):
    """Token counts of one model call (or a sum of calls).

    `input_tokens` counts every prompt token, cached ones included; `cached_input_tokens` says how
    many of them were served from the provider's prompt cache. `estimated` is True when the
    provider reported no usage and the counts are an estimate from the request and the answer
    (about 4 characters a token); False when they are the provider's own. A sum is estimated
    when any of its parts is.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        """`input_tokens + output_tokens` (cached tokens are already part of the input)."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        """Field-wise sum; `Usage()` is the neutral element."""
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            estimated=self.estimated or other.estimated,
        )


class UserMessage(_Frozen):
    """A message from the user (or an application acting for them): a string or content blocks."""

    role: Literal["user"] = "user"
    content: _Text | list[Content]
    timestamp: float = Field(default_factory=time.time)

    @property
    def text(self) -> str:
        """The content if it is a string, else its text blocks concatenated (images skipped)."""
        if isinstance(self.content, str):
            return self.content
        return _join_text(self.content)


class AssistantMessage(_Frozen):
    """A model's reply: text, thinking and tool-call blocks, with why it stopped and what it cost.

    `stop_reason="error"` or `"aborted"` marks a reply that did not finish; `error_message` then
    says why.
    """

    role: Literal["assistant"] = "assistant"
    content: list[AssistantContent] = Field(default_factory=list)
    stop_reason: StopReason = "stop"
    error_message: _Text | None = None
    usage: Usage = Field(default_factory=Usage)
    model: _Text = ""
    provider: _Text = ""
    timestamp: float = Field(default_factory=time.time)

    @property
    def text(self) -> str:
        """The text blocks concatenated in order (thinking and tool calls skipped)."""
        return _join_text(self.content)

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool-call blocks in order."""
        return [b for b in self.content if isinstance(b, ToolCall)]


class ToolResultMessage(_Frozen):
    """The result of one tool call, paired with it by `tool_call_id`.

    `details` is structured data for the application (never sent to the model); `trust` says
    whether the content may be followed as instructions (`"trusted"`) or is only data.
    """

    role: Literal["tool_result"] = "tool_result"
    tool_call_id: _Text
    tool_name: _Text
    content: list[Content] = Field(default_factory=list)
    details: _JsonObject | None = None
    is_error: bool = False
    trust: Trust = "trusted"
    timestamp: float = Field(default_factory=time.time)

    @property
    def text(self) -> str:
        """The text blocks concatenated in order (images skipped)."""
        return _join_text(self.content)


class ToolResult(_Frozen):
    """What a tool returns; the loop wraps it into a `ToolResultMessage` paired with the call."""

    content: list[Content] = Field(default_factory=list)
    details: _JsonObject | None = None
    is_error: bool = False
    trust: Trust = "trusted"

    @classmethod
    def text(cls, s: str, **kw: Any) -> ToolResult:
        """A result with one text block `s`; `kw` sets the other fields (`is_error=True`, ...).

        Raises:
            pydantic.ValidationError: `kw` names an unknown field or holds an invalid value.
        """
        return cls(content=[TextContent(text=s)], **kw)


Message = Annotated[UserMessage | AssistantMessage | ToolResultMessage, Field(discriminator="role")]
"""Any transcript message, discriminated by `role`."""

MessageAdapter: TypeAdapter[Message] = TypeAdapter(Message)
"""Validates / parses one `Message` from Python data or JSON (`validate_json`)."""

MessageListAdapter: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
"""Validates / parses a list of `Message`s, e.g. a stored transcript."""
