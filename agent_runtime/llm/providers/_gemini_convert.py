"""The Gemini adapter's pure conversions between our types and the generateContent wire format.

No I/O here: requests become API bodies, response chunks become our stream chunks.
Our transcript maps onto `generateContent` as follows:

- `ChatRequest.system` goes to `systemInstruction`; user messages are `user` contents with text
  and `inlineData` parts, assistant messages `model` contents with text, thought and
  `functionCall` parts. Consecutive tool results merge into one `user` content of
  `functionResponse` parts (`response: {"result": text}`, or `{"error": text}` when `is_error`),
  their images appended as `inlineData` parts after them.
- Tool-call ids: a `functionCall` that arrives without an `id` (most models before Gemini 3) gets
  `SYNTHETIC_CALL_ID_PREFIX + <response id> + "-" + <n>`, deterministic and unique within the
  response (and across responses, as Gemini's `responseId` is). An id with that prefix is never
  sent back: the `functionCall` and its `functionResponse` are then matched by name and order,
  as Gemini does for calls without ids. Real ids are echoed unchanged.
- Thought signatures: a `thoughtSignature` on a text or `functionCall` part becomes a
  `ThinkingContent(thinking="", signature=sig)` placed right before the block of that part (it
  may merge into a preceding thought-summary block: `ThinkingContent(summary, sig)`). On the way
  back, a signature is attached, unchanged, to the first text or `functionCall` part after it in
  the same message; when none follows (Gemini ends some streams with an empty text part holding
  the signature) it is sent on an empty text part, as received. Thought summaries
  (`thought: true`) become thinking text and are sent back as thought parts. Thinking from other
  providers (`AssistantMessage.provider` not `gemini` or empty) is dropped: its signatures mean
  nothing to Gemini.
- `tools` become one `functionDeclarations` tool; parameters go to `parametersJsonSchema`, which
  takes plain JSON Schema (`additionalProperties`, `$ref`, `anyOf`, `title`), so nothing is
  stripped but a root `$schema`. `tool_choice` is `toolConfig.functionCallingConfig.mode`:
  `auto` -> AUTO, `none` -> NONE, `required` -> ANY, a tool name -> ANY with
  `allowedFunctionNames`.
- `generationConfig`: `temperature`, `maxOutputTokens`; `reasoning` -> `thinkingConfig:
  {"thinkingBudget": n, "includeThoughts": true}` with `n` from `ThinkingBudgets` (`off` sends
  nothing); `response_schema` -> `responseMimeType: application/json` + `responseJsonSchema`.
- Response chunks (each streamed event, or the one non-streamed body, is a
  `GenerateContentResponse`): Gemini has no `[DONE]`; the terminal marker is a chunk with a
  `finishReason` (or a `promptFeedback` `blockReason`), and `GeminiStreamDecoder.finish` gives
  the `FinishDelta` once the source ended after one was seen, so usage arriving in a later chunk
  still counts. A source that ended without one raises `NetworkError`.
- Finish reasons: `STOP` -> `stop`, `MAX_TOKENS` -> `length`, anything else (`SAFETY`,
  `RECITATION`, `MALFORMED_FUNCTION_CALL`, a blocked prompt ...) -> `error`, the raw reason kept
  in `ChatResponse.raw_finish_reason`; any `functionCall` makes it `tool_use` (the builder).
- Usage: `input_tokens` = `promptTokenCount` (which includes cached tokens) +
  `toolUsePromptTokenCount`; `output_tokens` = `candidatesTokenCount + thoughtsTokenCount`;
  `cached_input_tokens` = `cachedContentTokenCount`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from agent_runtime._thinking import ThinkingBudgets
from agent_runtime.llm.errors import NetworkError
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
    "PROVIDER",
    "SYNTHETIC_CALL_ID_PREFIX",
    "GeminiStreamDecoder",
    "contents_to_wire",
    "error_body",
    "request_body",
    "stop_reason_from_wire",
    "usage_from_wire",
]

PROVIDER = "gemini"
SYNTHETIC_CALL_ID_PREFIX = "gemini-synth-"
"""Prefix of the tool-call ids made up for `functionCall`s that came without one."""

_TOOL_CHOICE_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY", "any": "ANY"}


# -- our messages -> wire ----------------------------------------------------------------------


def request_body(request: ChatRequest, *, budgets: ThinkingBudgets | None = None) -> dict[str, Any]:
    """The `generateContent` JSON body for `request` (the same for the streamed call)."""
    body: dict[str, Any] = {"contents": contents_to_wire(request.messages)}
    if request.system:
        body["systemInstruction"] = {"parts": [{"text": request.system}]}
    if request.tools:
        body["tools"] = [{"functionDeclarations": [_declaration(t) for t in request.tools]}]
        if request.tool_choice is not None:
            body["toolConfig"] = {"functionCallingConfig": _calling_config(request.tool_choice)}
    config: dict[str, Any] = {}
    if request.temperature is not None:
        config["temperature"] = request.temperature
    if request.max_output_tokens is not None:
        config["maxOutputTokens"] = request.max_output_tokens
    if request.reasoning not in (None, "off"):
        budget = getattr(budgets or ThinkingBudgets(), str(request.reasoning))
        config["thinkingConfig"] = {"thinkingBudget": budget, "includeThoughts": True}
    if request.response_schema is not None:
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = _json_schema(request.response_schema)
    if config:
        body["generationConfig"] = config
    return body


def _declaration(tool: ToolSpec) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": tool.name}
    if tool.description:
        declaration["description"] = tool.description
    declaration["parametersJsonSchema"] = _json_schema(tool.parameters)
    return declaration


def _json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k != "$schema"}


def _calling_config(tool_choice: str) -> dict[str, Any]:
    mode = _TOOL_CHOICE_MODES.get(tool_choice)
    if mode is not None:
        return {"mode": mode}
    return {"mode": "ANY", "allowedFunctionNames": [tool_choice]}


def contents_to_wire(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Our transcript as Gemini `contents` (see the module docstring for the rules)."""
    contents: list[dict[str, Any]] = []
    results: list[ToolResultMessage] = []
    for message in [*messages, None]:
        if isinstance(message, ToolResultMessage):
            results.append(message)
            continue
        if results:
            contents.append({"role": "user", "parts": _result_parts(results)})
            results = []
        if isinstance(message, UserMessage):
            parts = _user_parts(message.content)
            role = "user"
        elif isinstance(message, AssistantMessage):
            parts = _model_parts(message)
            role = "model"
        else:
            continue
        if parts:
            contents.append({"role": role, "parts": parts})
    return contents


def _user_parts(content: str | Sequence[TextContent | ImageContent]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, ImageContent):
            parts.append({"inlineData": {"mimeType": block.mime_type, "data": block.data}})
        elif block.text:
            parts.append({"text": block.text})
    return parts


def _model_parts(message: AssistantMessage) -> list[dict[str, Any]]:
    own = message.provider in ("", PROVIDER)
    parts: list[dict[str, Any]] = []
    signature: str | None = None
    for block in message.content:
        if isinstance(block, ThinkingContent):
            if not own or block.redacted:
                continue
            if block.thinking:
                parts.append({"text": block.thinking, "thought": True})
            if block.signature:
                if signature is not None:
                    parts.append({"text": "", "thoughtSignature": signature})
                signature = block.signature
            continue
        if isinstance(block, TextContent):
            if not block.text and signature is None:
                continue
            part: dict[str, Any] = {"text": block.text}
        else:
            part = {"functionCall": _function_call(block)}
        if signature is not None:
            part["thoughtSignature"] = signature
            signature = None
        parts.append(part)
    if signature is not None:
        parts.append({"text": "", "thoughtSignature": signature})
    return parts


def _function_call(call: ToolCall) -> dict[str, Any]:
    wire: dict[str, Any] = {"name": call.name, "args": call.arguments}
    if not call.id.startswith(SYNTHETIC_CALL_ID_PREFIX):
        wire["id"] = call.id
    return wire


def _result_parts(results: Sequence[ToolResultMessage]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for result in results:
        key = "error" if result.is_error else "result"
        response: dict[str, Any] = {"name": result.tool_name, "response": {key: result.text}}
        if not result.tool_call_id.startswith(SYNTHETIC_CALL_ID_PREFIX):
            response["id"] = result.tool_call_id
        parts.append({"functionResponse": response})
        images.extend(p for p in _user_parts(result.content) if "inlineData" in p)
    return parts + images


# -- wire -> our chunks ------------------------------------------------------------------------


def stop_reason_from_wire(reason: str) -> StopReason:
    """Our stop reason for a Gemini `finishReason` (`STOP`, `MAX_TOKENS`, else `error`)."""
    if reason == "STOP":
        return "stop"
    if reason == "MAX_TOKENS":
        return "length"
    return "error"


def usage_from_wire(usage: Mapping[str, Any]) -> Usage:
    """Our `Usage` for a Gemini `usageMetadata` (see the module docstring)."""

    def count(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) else 0

    return Usage(
        input_tokens=count("promptTokenCount") + count("toolUsePromptTokenCount"),
        output_tokens=count("candidatesTokenCount") + count("thoughtsTokenCount"),
        cached_input_tokens=count("cachedContentTokenCount"),
    )


class GeminiStreamDecoder:
    """Turns `GenerateContentResponse` chunks (streamed, or one whole answer) into StreamChunks.

    Feed every chunk in order with `feed`, then call `finish` once the source ended: it
    returns the `FinishDelta` when a terminal marker was seen. Error chunks are not handled here
    (`error_body` finds them). Only the first candidate is read. Not thread-safe.
    """

    def __init__(self) -> None:
        self._calls = 0
        self._response_id: str | None = None
        self._raw_finish: str | None = None

    def feed(self, chunk: Mapping[str, Any]) -> list[StreamChunk]:
        """The stream chunks carried by one response chunk."""
        if self._response_id is None and isinstance(chunk.get("responseId"), str):
            self._response_id = re.sub(r"[^A-Za-z0-9_-]", "", chunk["responseId"])
        out: list[StreamChunk] = []
        candidates = chunk.get("candidates")
        candidate = candidates[0] if isinstance(candidates, list) and candidates else None
        if isinstance(candidate, Mapping):
            content = candidate.get("content")
            parts = content.get("parts") if isinstance(content, Mapping) else None
            for part in parts if isinstance(parts, list) else []:
                if isinstance(part, Mapping):
                    out.extend(self._part(part))
            reason = candidate.get("finishReason")
            if isinstance(reason, str) and reason != "FINISH_REASON_UNSPECIFIED":
                self._raw_finish = reason
        else:
            feedback = chunk.get("promptFeedback")
            blocked = feedback.get("blockReason") if isinstance(feedback, Mapping) else None
            if isinstance(blocked, str):
                self._raw_finish = f"PROMPT_BLOCKED:{blocked}"
        usage = chunk.get("usageMetadata")
        if isinstance(usage, Mapping):
            out.append(UsageDelta(usage=usage_from_wire(usage)))
        return out

    def _part(self, part: Mapping[str, Any]) -> list[StreamChunk]:
        raw_signature = part.get("thoughtSignature")
        signature = str(raw_signature) if raw_signature else None
        text = part.get("text")
        text = text if isinstance(text, str) else ""
        if part.get("thought"):
            if not text and signature is None:
                return []
            return [ThinkingDelta(text=text, signature=signature)]
        out: list[StreamChunk] = []
        if signature is not None:
            out.append(ThinkingDelta(signature=signature))
        call = part.get("functionCall")
        if isinstance(call, Mapping):
            out.append(self._call(call))
        elif text:
            out.append(TextDelta(text=text))
        return out

    def _call(self, call: Mapping[str, Any]) -> ToolCallDelta:
        index = self._calls
        self._calls += 1
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            scope = f"{self._response_id}-" if self._response_id else ""
            call_id = f"{SYNTHETIC_CALL_ID_PREFIX}{scope}{index}"
        args = call.get("args")
        return ToolCallDelta(
            index=index,
            id=call_id,
            name=str(call.get("name") or ""),
            arguments=json.dumps(args if isinstance(args, Mapping) else {}),
        )

    def finish(self) -> FinishDelta:
        """The terminal chunk, once the source ended.

        Raises:
            NetworkError: no chunk carried a `finishReason` (the stream was cut).
        """
        if self._raw_finish is None:
            raise NetworkError(
                "the Gemini stream ended without a finishReason (connection cut mid-answer)",
                provider=PROVIDER,
            )
        return FinishDelta(
            reason=stop_reason_from_wire(self._raw_finish), raw_reason=self._raw_finish
        )


def error_body(data: Any) -> Mapping[str, Any] | None:
    """The `{"error": ...}` body inside a stream event (also list-wrapped), else None."""
    if isinstance(data, list) and data:
        data = data[0]
    if isinstance(data, Mapping) and "error" in data:
        return data
    return None
