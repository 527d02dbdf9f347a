"""The data of the LLM port: requests, responses, stream chunks, model info and pricing."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from agent_runtime.messages import AssistantMessage, Message, StopReason, Usage

Capability = Literal["tools", "vision", "structured_output", "reasoning", "streaming"]
ALL_CAPABILITIES: frozenset[Capability] = frozenset(
    ("tools", "vision", "structured_output", "reasoning", "streaming")
)
ReasoningLevel = Literal["off", "minimal", "low", "medium", "high", "xhigh"]
REASONING_LEVELS: tuple[ReasoningLevel, ...] = ("off", "minimal", "low", "medium", "high", "xhigh")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelPricing(_Frozen):
    """Prices in USD per million tokens; `cost(usage)` prices one response."""

    input: float = Field(default=0.0, ge=0)
    output: float = Field(default=0.0, ge=0)
    cached_input: float = Field(default=0.0, ge=0)

    def cost(self, usage: Usage) -> float:
        """USD for `usage`: cached input tokens at `cached_input`, the rest at `input`."""
        uncached = max(usage.input_tokens - usage.cached_input_tokens, 0)
        return (
            uncached * self.input
            + usage.cached_input_tokens * self.cached_input
            + usage.output_tokens * self.output
        ) / 1_000_000


class ModelInfo(_Frozen):
    """What a model is and can do."""

    provider: str
    model: str
    capabilities: frozenset[Capability] = ALL_CAPABILITIES
    context_window: int | None = None
    pricing: ModelPricing | None = None


class ToolSpec(_Frozen):
    """A tool as the model sees it: name, description and JSON-schema parameters."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ChatRequest(_Frozen):
    """One model call, provider-independent.

    `tools`: `ToolSpec`s, or `Tool`s (anything whose `spec()` returns a `ToolSpec`, such as a
    tool registry's tools), each kept as its spec.
    `tool_choice`: "auto" (default when tools are given), "none", "required", or a tool name.
    `response_schema`: a JSON schema the answer must follow (structured output).
    `reasoning`: a thinking level, mapped to each provider's own parameters.
    """

    messages: list[Message] = Field(default_factory=list)
    system: str | None = None
    tools: list[ToolSpec] = Field(default_factory=list)
    tool_choice: str | None = None
    temperature: float | None = Field(default=None, ge=0)
    max_output_tokens: int | None = Field(default=None, ge=1)
    response_schema: dict[str, Any] | None = None
    reasoning: ReasoningLevel | None = None
    _vision: tuple[list[Message], bool] | None = PrivateAttr(default=None)

    @field_validator("tools", mode="before")
    @classmethod
    def _specs_of_tools(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return [_spec_of(item) for item in value]
        return value

    def mark_vision(self, vision: bool) -> None:
        """Record whether `messages` carry an image (the agent loop tracks it as they are
        added), so `needed_capabilities` does not scan every message of a long history. The
        mark holds for this `messages` list only (a copy with other messages is scanned)."""
        self._vision = (self.messages, vision)

    def __eq__(self, other: object) -> bool:
        # The fields decide; the vision mark is a cache, not part of the value.
        if not isinstance(other, ChatRequest):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    __hash__ = BaseModel.__hash__


def _spec_of(item: Any) -> Any:
    """A `Tool`'s spec; anything else as it is (for pydantic to accept or name)."""
    if isinstance(item, ToolSpec):
        return item
    spec = getattr(item, "spec", None)
    if callable(spec):
        made = spec()
        if isinstance(made, ToolSpec):
            return made
    return item


class TextDelta(_Frozen):
    """A fragment of answer text."""

    type: Literal["text"] = "text"
    text: str


class ThinkingDelta(_Frozen):
    """A fragment of reasoning, or its signature (sent back unchanged on later turns)."""

    type: Literal["thinking"] = "thinking"
    text: str = ""
    signature: str | None = None
    redacted: bool = False


class ToolCallDelta(_Frozen):
    """A fragment of a tool call: id and name arrive once, arguments in pieces."""

    type: Literal["tool_call"] = "tool_call"
    index: int | None = None
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class UsageDelta(_Frozen):
    """Token usage so far; a later one replaces an earlier one (never summed)."""

    type: Literal["usage"] = "usage"
    usage: Usage


class FinishDelta(_Frozen):
    """The provider's terminal marker, with its stop reason. `provider` and `model`, when
    set, name who answered when that is not the model streamed from (a fallback pool's
    backup): the answer is built as theirs."""

    type: Literal["finish"] = "finish"
    reason: StopReason
    raw_reason: str | None = None
    provider: str | None = None
    model: str | None = None


StreamChunk = Annotated[
    TextDelta | ThinkingDelta | ToolCallDelta | UsageDelta | FinishDelta,
    Field(discriminator="type"),
]


class ChatResponse(_Frozen):
    """A complete answer: the assistant message plus usage, stop reason and cost."""

    message: AssistantMessage
    usage: Usage = Field(default_factory=Usage)
    stop_reason: StopReason = "stop"
    cost: float | None = None
    request_id: str | None = None
    raw_finish_reason: str | None = None

    @property
    def text(self) -> str:
        """The answer text (all text blocks joined)."""
        return self.message.text

    @property
    def truncated(self) -> bool:
        """True when the output token limit cut the answer off."""
        return self.stop_reason == "length"

    def ensure_complete(self) -> ChatResponse:
        """Return self, or raise if the answer was cut off by the output token limit.

        Raises:
            TruncatedResponseError: `stop_reason == "length"`; the message names the fix.
        """
        if self.truncated:
            from agent_runtime.llm.errors import TruncatedResponseError

            raise TruncatedResponseError(
                "the response was cut off by the output token limit "
                f"({self.usage.output_tokens} output tokens); raise max_output_tokens on the "
                "ChatRequest or ask for a shorter answer"
            )
        return self


def with_cost(response: ChatResponse, pricing: ModelPricing | None) -> ChatResponse:
    """The response with `cost` computed from `pricing` (unchanged when there is none)."""
    if pricing is None:
        return response
    return response.model_copy(update={"cost": pricing.cost(response.usage)})


def needed_capabilities(request: ChatRequest) -> set[Capability]:
    """The capabilities a request relies on (streaming is the caller's choice, not here)."""
    from agent_runtime.messages import ImageContent, ToolResultMessage, UserMessage

    needed: set[Capability] = set()
    if request.tools:
        needed.add("tools")
    if request.response_schema is not None:
        needed.add("structured_output")
    if request.reasoning not in (None, "off"):
        needed.add("reasoning")
    mark = request._vision
    vision = mark[1] if mark is not None and mark[0] is request.messages else None
    if vision is None:
        vision = any(
            not isinstance(m.content, str) and any(isinstance(b, ImageContent) for b in m.content)
            for m in request.messages
            if isinstance(m, UserMessage | ToolResultMessage)
        )
    if vision:
        needed.add("vision")
    return needed
