"""Conversions between our messages and the OpenAI Chat Completions wire format (pure functions).

Requests: `to_wire_messages`, `request_body`. Answers: `chunk_deltas` (one streamed
`chat.completion.chunk`), `response_from_wire` (a whole `chat.completion`), `completion_chunks`
(a whole `chat.completion` as stream chunks), `usage_of`,
`stop_reason_of`. No I/O here; the adapter in `agent_runtime.llm.providers.openai` does the HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

from agent_runtime.llm.builder import ChatResponseBuilder
from agent_runtime.llm.errors import ProviderError
from agent_runtime.llm.types import (
    ChatRequest,
    ChatResponse,
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
    Content,
    ImageContent,
    Message,
    StopReason,
    TextContent,
    ToolResultMessage,
    Usage,
    UserMessage,
)

MaxTokensParam = Literal["max_tokens", "max_completion_tokens"]
"""Which request field carries `max_output_tokens`: OpenAI's own API wants the newer
`max_completion_tokens`, most compatible servers only know `max_tokens`."""

StructuredOutputMode = Literal["json_schema", "json_object"]
"""How `response_schema` is sent: `json_schema` (schema enforced by the server) or
`json_object` (JSON mode; the schema goes into the system message, e.g. for DeepSeek)."""

_EFFORT = {"minimal": "minimal", "low": "low", "medium": "medium", "high": "high", "xhigh": "high"}

_FINISH: dict[str, StopReason] = {
    "stop": "stop",
    "eos": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "length": "length",
    "max_tokens": "length",
    "model_length": "length",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "tool_use": "tool_use",
    "content_filter": "error",
    "error": "error",
}

_TOOL_IMAGES_NOTE = "Images returned by the tool calls above:"


def _image_part(image: ImageContent) -> dict[str, Any]:
    url = f"data:{image.mime_type};base64,{image.data}"
    return {"type": "image_url", "image_url": {"url": url}}


def _user_content(content: str | list[Content]) -> str | list[dict[str, Any]]:
    """A string when there are no images (the widest-supported form), else content parts."""
    if isinstance(content, str):
        return content
    if not any(isinstance(block, ImageContent) for block in content):
        return "".join(block.text for block in content if isinstance(block, TextContent))
    return [
        {"type": "text", "text": block.text}
        if isinstance(block, TextContent)
        else _image_part(block)
        for block in content
    ]


def _assistant(message: AssistantMessage) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": "assistant", "content": message.text}
    calls = message.tool_calls
    if calls:
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in calls
        ]
        # "" (not null, not omitted): llama-cpp-python answers both of those with HTTP 500,
        # and every Chat Completions server takes an empty string.
        wire["content"] = wire["content"] or ""
    return wire


def to_wire_messages(
    messages: Iterable[Message], system: str | None = None
) -> list[dict[str, Any]]:
    """Our transcript as Chat Completions messages.

    The system prompt is the first `system` message. Thinking blocks are dropped (servers
    reject or ignore them). Tool-call arguments are re-serialised from `ToolCall.arguments`.
    Tool messages carry text only, so images in tool results follow the run of tool messages
    as one user message (a user message between tool messages would be rejected).
    """
    wire: list[dict[str, Any]] = []
    if system:
        wire.append({"role": "system", "content": system})
    images: list[dict[str, Any]] = []
    for message in messages:
        if images and not isinstance(message, ToolResultMessage):
            wire.append(_tool_images(images))
            images = []
        if isinstance(message, UserMessage):
            wire.append({"role": "user", "content": _user_content(message.content)})
        elif isinstance(message, AssistantMessage):
            wire.append(_assistant(message))
        else:
            wire.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}
            )
            images.extend(_image_part(b) for b in message.content if isinstance(b, ImageContent))
    if images:
        wire.append(_tool_images(images))
    return wire


def _tool_images(images: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": _TOOL_IMAGES_NOTE}, *images]}


def _tool(spec: ToolSpec) -> dict[str, Any]:
    function = {"name": spec.name, "description": spec.description, "parameters": spec.parameters}
    return {"type": "function", "function": function}


def _tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def request_body(
    request: ChatRequest,
    *,
    model: str,
    stream: bool,
    max_tokens_param: MaxTokensParam = "max_tokens",
    structured_output_mode: StructuredOutputMode = "json_schema",
) -> dict[str, Any]:
    """The JSON body of a `/chat/completions` call for `request`.

    `reasoning` becomes `reasoning_effort` (`xhigh` is sent as `high`; `off`/None send
    nothing); `tool_choice` is sent only with tools; a streamed call asks for the usage chunk.
    """
    system = request.system
    if request.response_schema is not None and structured_output_mode == "json_object":
        schema = json.dumps(request.response_schema)
        note = f"Answer with a JSON object that follows this JSON schema:\n{schema}"
        system = f"{system}\n\n{note}" if system else note
    body: dict[str, Any] = {"model": model, "messages": to_wire_messages(request.messages, system)}
    if request.tools:
        body["tools"] = [_tool(spec) for spec in request.tools]
        if request.tool_choice is not None:
            body["tool_choice"] = _tool_choice(request.tool_choice)
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_output_tokens is not None:
        body[max_tokens_param] = request.max_output_tokens
    if request.reasoning is not None and request.reasoning != "off":
        body["reasoning_effort"] = _EFFORT[request.reasoning]
    if request.response_schema is not None:
        if structured_output_mode == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": "response",
                    "schema": request.response_schema,
                    "strict": strict_compatible(request.response_schema),
                },
            }
        else:
            body["response_format"] = {"type": "json_object"}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def strict_compatible(schema: Any) -> bool:
    """Whether OpenAI's strict mode accepts `schema`: every object lists all its properties as
    required and forbids others (pydantic's default schemas often don't; then strict is off
    and the middleware's validation is the only check)."""
    if isinstance(schema, list):
        return all(strict_compatible(item) for item in schema)
    if not isinstance(schema, dict):
        return True
    properties = schema.get("properties")
    if isinstance(properties, dict) and (
        schema.get("additionalProperties") is not False
        or set(schema.get("required", [])) != set(properties)
    ):
        return False
    return all(strict_compatible(value) for value in schema.values())


def stop_reason_of(finish_reason: str | None) -> StopReason:
    """Our stop reason for a wire `finish_reason`.

    `stop`/None -> `stop`, `length` -> `length`, `tool_calls`/`function_call` -> `tool_use`,
    `content_filter` -> `error` (the answer was withheld or cut by moderation; the raw reason
    stays in `ChatResponse.raw_finish_reason`); an unknown reason -> `stop`. Whether tools were
    called is settled by the builder from the calls themselves.
    """
    return _FINISH.get(finish_reason or "stop", "stop")


def usage_of(usage: Mapping[str, Any]) -> Usage:
    """`Usage` from a wire `usage` object; cached tokens from `prompt_tokens_details` (OpenAI,
    Groq, ...) or `prompt_cache_hit_tokens` (DeepSeek)."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    if cached is None:
        cached = usage.get("prompt_cache_hit_tokens")
    return Usage(
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        cached_input_tokens=int(cached or 0),
    )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts (Mistral and others)
        return "".join(
            str(part.get("text") or "")
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return ""


def _call_deltas(calls: Any) -> Iterator[ToolCallDelta]:
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            arguments = json.dumps(arguments)  # servers that send an object, not a string
        index = call.get("index")
        yield ToolCallDelta(
            index=index if isinstance(index, int) else None,
            id=call.get("id") or None,  # "" on continuation fragments means "not sent"
            name=function.get("name") or None,
            arguments=arguments or "",
        )


def _message_deltas(message: Mapping[str, Any]) -> Iterator[StreamChunk]:
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        yield ThinkingDelta(text=reasoning)
    text = _text_of(message.get("content"))
    if text:
        yield TextDelta(text=text)
    yield from _call_deltas(message.get("tool_calls"))


def chunk_deltas(payload: Mapping[str, Any]) -> tuple[list[StreamChunk], str | None]:
    """The stream chunks of one `chat.completion.chunk`, and its `finish_reason` (or None).

    Only choice 0 is read. Tool-call fragments pass through as sent (the builder groups
    them); an empty `id` or `name` counts as absent. A `usage` object anywhere (the usage
    chunk with empty `choices`, or llama.cpp's final chunk) becomes a `UsageDelta`.
    """
    chunks: list[StreamChunk] = []
    finish: str | None = None
    choices = payload.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
            continue
        delta = choice.get("delta")
        if isinstance(delta, Mapping):
            chunks.extend(_message_deltas(delta))
        if choice.get("finish_reason"):
            finish = str(choice["finish_reason"])
    usage = payload.get("usage")
    if isinstance(usage, Mapping):
        chunks.append(UsageDelta(usage=usage_of(usage)))
    return chunks, finish


def response_from_wire(
    body: Mapping[str, Any], *, model: str, provider: str, request_id: str | None = None
) -> ChatResponse:
    """The `ChatResponse` of a non-streamed `chat.completion` body.

    Assembled by the same `ChatResponseBuilder` as a stream, so both paths agree.

    Raises:
        ProviderError: the body has no choices.
    """
    builder = ChatResponseBuilder(model=model, provider=provider)
    builder.request_id = request_id
    for chunk in completion_chunks(body, provider=provider, request_id=request_id):
        builder.add(chunk)
    return builder.build()


def completion_chunks(
    body: Mapping[str, Any], *, provider: str, request_id: str | None = None
) -> list[StreamChunk]:
    """A non-streamed `chat.completion` body as the chunks a stream of it would carry, ending
    with its `FinishDelta` (a `UsageDelta` before it only when the body has `usage`).

    Raises:
        ProviderError: the body has no choices.
    """
    choices = body.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, Mapping):
        raise ProviderError(
            f"{provider} answered without choices: {json.dumps(body)[:200]}",
            provider=provider,
            request_id=request_id,
            body=body,
        )
    message = choice.get("message")
    chunks = list(_message_deltas(message if isinstance(message, Mapping) else {}))
    usage = body.get("usage")
    if isinstance(usage, Mapping):
        chunks.append(UsageDelta(usage=usage_of(usage)))
    raw = choice.get("finish_reason")
    raw = str(raw) if raw else None
    chunks.append(FinishDelta(reason=stop_reason_of(raw), raw_reason=raw))
    return chunks


def is_error(payload: Any) -> bool:
    """Whether a body or stream event is an error object (`{"error": ...}` or vLLM's flat one)."""
    return isinstance(payload, Mapping) and (
        bool(payload.get("error")) or payload.get("object") == "error"
    )
