"""The Anthropic adapter's pure conversions between our types and the Messages API wire format.

No I/O here: requests become API bodies, API messages and stream events become chunks.
Our transcript maps onto the Messages API as follows:

- `ChatRequest.system` goes to the top-level `system` field.
- Consecutive messages of one role are merged into one wire message (the API requires user and
  assistant turns to alternate); tool results become `tool_result` blocks of a user message,
  placed before any text of that message (the API requires them first).
- Thinking blocks are sent back unchanged with their `signature`; a redacted block is sent as
  `{"type": "redacted_thinking", "data": <signature>}`. Thinking without a signature (from
  another provider, or cut off before its signature arrived) cannot be replayed and is dropped.
- `reasoning` becomes `thinking: {"type": "enabled", "budget_tokens": n}` with `n` from
  `ThinkingBudgets` (at least 1024, the API's minimum); `max_tokens` is raised to `n` plus the
  requested output when it would not exceed `n`, and `temperature` is dropped (the API rejects
  it with thinking on). The API also rejects a forced `tool_choice` (`required` or a tool name)
  with thinking on; that is passed through and comes back as `InvalidRequestError`.
- `response_schema`: the basic Messages API has no JSON-schema response mode, so JSON mode is an
  instruction with the schema appended to the system prompt; validation is the middleware's job.
- Stop reasons: `end_turn`, `stop_sequence`, `pause_turn` -> `stop`; `max_tokens`,
  `model_context_window_exceeded` -> `length`; `tool_use` -> `tool_use`; `refusal` (and any
  unknown reason) -> `error`, the raw reason kept in `ChatResponse.raw_finish_reason`.
- Usage: `input_tokens` is the API's `input_tokens + cache_read_input_tokens +
  cache_creation_input_tokens`; `cached_input_tokens` is `cache_read_input_tokens`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agent_runtime._thinking import ThinkingBudgets
from agent_runtime.llm.types import (
    ChatRequest,
    FinishDelta,
    StreamChunk,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolSpec,
    UsageDelta,
)
from agent_runtime.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

__all__ = [
    "MIN_THINKING_BUDGET",
    "StreamDecoder",
    "chunks_from_message",
    "messages_to_wire",
    "request_body",
    "stop_reason_from_wire",
    "tool_choice_to_wire",
    "tool_to_wire",
]

MIN_THINKING_BUDGET = 1024
"""The smallest `budget_tokens` the API accepts."""

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_use",
}

_JSON_MODE = (
    "Answer with a single JSON value that conforms to the JSON schema below. Output only the "
    "JSON: no prose, no Markdown code fences.\n\nJSON schema:\n"
)

PROVIDER = "anthropic"
"""The provider name of the Anthropic adapter and of the answers it builds."""


# -- our messages -> the wire ----------------------------------------------------------------


def request_body(
    request: ChatRequest,
    *,
    model: str,
    max_output_tokens: int = 4096,
    thinking_budgets: ThinkingBudgets | None = None,
    stream: bool = False,
) -> dict[str, Any]:
    """The JSON body of `POST /v1/messages` for `request` (see the module docstring)."""
    max_tokens = request.max_output_tokens or max_output_tokens
    body: dict[str, Any] = {"model": model, "messages": messages_to_wire(request.messages)}
    system = request.system or ""
    if request.response_schema is not None:
        schema = json.dumps(request.response_schema, indent=2)
        system = f"{system}\n\n{_JSON_MODE}{schema}" if system else f"{_JSON_MODE}{schema}"
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = [tool_to_wire(tool) for tool in request.tools]
        choice = tool_choice_to_wire(request.tool_choice)
        if choice is not None:
            body["tool_choice"] = choice
    if request.reasoning not in (None, "off"):
        budgets = thinking_budgets or ThinkingBudgets()
        budget = max(int(getattr(budgets, request.reasoning)), MIN_THINKING_BUDGET)
        if max_tokens <= budget:
            max_tokens += budget
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    elif request.temperature is not None:
        body["temperature"] = request.temperature
    body["max_tokens"] = max_tokens
    if stream:
        body["stream"] = True
    return body


def tool_to_wire(tool: ToolSpec) -> dict[str, Any]:
    """A tool as the API declares one: `name`, `description`, `input_schema`."""
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def tool_choice_to_wire(choice: str | None) -> dict[str, Any] | None:
    """`auto`/`none` as is, `required` -> `any`, any other string names the one tool to call."""
    if choice is None:
        return None
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice in ("required", "any"):
        return {"type": "any"}
    return {"type": "tool", "name": choice}


def messages_to_wire(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Our transcript as the API's alternating `messages` list.

    Consecutive messages of one role become one wire message; empty messages are left out;
    in a user message the `tool_result` blocks come first (the API requires it).
    """
    wire: list[dict[str, Any]] = []
    for message in messages:
        role, blocks = _message_to_wire(message)
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    for entry in wire:
        if entry["role"] == "user":
            content = entry["content"]
            entry["content"] = [b for b in content if b["type"] == "tool_result"] + [
                b for b in content if b["type"] != "tool_result"
            ]
    return wire


def _message_to_wire(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(message, UserMessage):
        content = message.content
        if isinstance(content, str):
            return "user", [{"type": "text", "text": content}] if content else []
        return "user", _content_to_wire(content)
    if isinstance(message, ToolResultMessage):
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
        content_blocks = _content_to_wire(message.content)
        if content_blocks:
            result["content"] = content_blocks
        result["is_error"] = message.is_error
        return "user", [result]
    return "assistant", _assistant_to_wire(message)


def _content_to_wire(content: Iterable[TextContent | ImageContent]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            if block.text:
                blocks.append({"type": "text", "text": block.text})
        else:
            source = {"type": "base64", "media_type": block.mime_type, "data": block.data}
            blocks.append({"type": "image", "source": source})
    return blocks


def _assistant_to_wire(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    own = message.provider in ("", PROVIDER)  # another provider's signature is refused
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text:
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            if block.signature is None or not own:
                continue  # unsigned or another provider's thinking cannot be replayed
            if block.redacted:
                blocks.append({"type": "redacted_thinking", "data": block.signature})
            else:
                blocks.append(
                    {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
                )
        elif isinstance(block, ToolCall):
            blocks.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": block.arguments}
            )
    return blocks


# -- the wire -> our chunks --------------------------------------------------------------------


def stop_reason_from_wire(raw: str | None) -> StopReason:
    """Our stop reason for the API's `stop_reason` (None, as before any arrived, is `stop`)."""
    if raw is None:
        return "stop"
    return _STOP_REASONS.get(raw, "error")


def _block_chunks(index: int, block: Mapping[str, Any]) -> list[StreamChunk]:
    """The chunks a content block carries as it starts (or, non-streamed, as a whole)."""
    kind = block.get("type")
    if kind == "text":
        text = block.get("text") or ""
        return [TextDelta(text=text)] if text else []
    if kind == "thinking":
        thinking = block.get("thinking") or ""
        signature = block.get("signature") or None
        return [ThinkingDelta(text=thinking, signature=signature)] if thinking or signature else []
    if kind == "redacted_thinking":
        return [ThinkingDelta(signature=str(block.get("data") or ""), redacted=True)]
    if kind == "tool_use":
        arguments = block.get("input")
        return [
            ToolCallDelta(
                index=index,
                id=block.get("id"),
                name=block.get("name"),
                arguments=json.dumps(arguments) if arguments else "",
            )
        ]
    return []  # server tool blocks, citations, future kinds: not ours to show


def _delta_chunks(index: int, delta: Mapping[str, Any]) -> list[StreamChunk]:
    kind = delta.get("type")
    if kind == "text_delta" and delta.get("text"):
        return [TextDelta(text=delta["text"])]
    if kind == "thinking_delta" and delta.get("thinking"):
        return [ThinkingDelta(text=delta["thinking"])]
    if kind == "signature_delta" and delta.get("signature"):
        return [ThinkingDelta(signature=delta["signature"])]
    if kind == "input_json_delta" and delta.get("partial_json"):
        return [ToolCallDelta(index=index, arguments=delta["partial_json"])]
    return []


class _WireUsage:
    """The API's usage counters, updated from `message_start` and `message_delta`."""

    def __init__(self) -> None:
        self.input = 0
        self.output = 0
        self.cache_read = 0
        self.cache_creation = 0

    def update(self, usage: Mapping[str, Any] | None) -> Usage:
        usage = usage or {}
        self.input = _count(usage, "input_tokens", self.input)
        self.output = _count(usage, "output_tokens", self.output)
        self.cache_read = _count(usage, "cache_read_input_tokens", self.cache_read)
        self.cache_creation = _count(usage, "cache_creation_input_tokens", self.cache_creation)
        return Usage(
            input_tokens=self.input + self.cache_read + self.cache_creation,
            output_tokens=self.output,
            cached_input_tokens=self.cache_read,
        )


def _count(usage: Mapping[str, Any], key: str, default: int) -> int:
    value = usage.get(key)
    return int(value) if isinstance(value, int | float) else default


class StreamDecoder:
    """Turns the API's stream events (parsed JSON) into `StreamChunk`s.

    `message_start` and `message_delta` yield a `UsageDelta` with the running totals;
    `message_stop` yields the one `FinishDelta` and sets `finished`. Tool-call fragments carry
    the content block's index. `ping` and unknown events yield nothing; `error` events are the
    caller's to raise. Not thread-safe: one decoder per stream.
    """

    def __init__(self) -> None:
        self._usage = _WireUsage()
        self._stop_reason: str | None = None
        self.finished = False

    def feed(self, event: Mapping[str, Any]) -> list[StreamChunk]:
        """The chunks one event carries (often none)."""
        kind = event.get("type")
        index = int(event.get("index") or 0)
        if kind == "content_block_start":
            return _block_chunks(index, event.get("content_block") or {})
        if kind == "content_block_delta":
            return _delta_chunks(index, event.get("delta") or {})
        if kind == "message_start":
            message = event.get("message") or {}
            return [UsageDelta(usage=self._usage.update(message.get("usage")))]
        if kind == "message_delta":
            delta = event.get("delta") or {}
            self._stop_reason = delta.get("stop_reason") or self._stop_reason
            return [UsageDelta(usage=self._usage.update(event.get("usage")))]
        if kind == "message_stop":
            self.finished = True
            reason = stop_reason_from_wire(self._stop_reason)
            return [FinishDelta(reason=reason, raw_reason=self._stop_reason)]
        return []


def chunks_from_message(message: Mapping[str, Any]) -> list[StreamChunk]:
    """A non-streamed message as the chunks its stream would have carried, `FinishDelta` last.

    Fed to a `ChatResponseBuilder`, they give the response the stream gives.
    """
    chunks: list[StreamChunk] = []
    for index, block in enumerate(message.get("content") or []):
        if isinstance(block, Mapping):
            chunks.extend(_block_chunks(index, block))
    chunks.append(UsageDelta(usage=_WireUsage().update(message.get("usage"))))
    raw = message.get("stop_reason")
    chunks.append(FinishDelta(reason=stop_reason_from_wire(raw), raw_reason=raw))
    return chunks
