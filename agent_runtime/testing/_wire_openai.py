"""The OpenAI Chat Completions wire format of the mock server (`/v1/chat/completions`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agent_runtime.llm.errors import (
    AuthenticationError,
    ContextLengthExceededError,
    LLMError,
    ModelNotFoundError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitError,
)
from agent_runtime.messages import StopReason, Usage
from agent_runtime.testing._sse import sse_frame
from agent_runtime.testing.scripted import ScriptedTurn

_FINISH: dict[StopReason, str] = {
    "stop": "stop",
    "length": "length",
    "tool_use": "tool_calls",
    "error": "content_filter",
    "aborted": "stop",
}

# (type, code) as OpenAI names them; the first match in this order wins.
_ERROR_NAMES: tuple[tuple[type[LLMError], str, str | None], ...] = (
    (ContextLengthExceededError, "invalid_request_error", "context_length_exceeded"),
    (AuthenticationError, "authentication_error", "invalid_api_key"),
    (PermissionDeniedError, "permission_error", None),
    (ModelNotFoundError, "invalid_request_error", "model_not_found"),
    (QuotaExceededError, "insufficient_quota", "insufficient_quota"),
    (RateLimitError, "requests", "rate_limit_exceeded"),
)

ARGUMENT_PIECE = 7
"""Streamed tool-call arguments are cut into pieces of this many characters."""


class OpenAIWire:
    """Chat Completions as OpenAI sends it: SSE `chat.completion.chunk`s, a usage chunk with
    empty `choices` when `stream_options.include_usage` is set, then `data: [DONE]`."""

    name = "openai"

    def base_url(self, root: str) -> str:
        """`root/v1`."""
        return root + "/v1"

    def matches(self, method: str, path: str, headers: Mapping[str, str]) -> bool:
        """POST /v1/chat/completions or GET /v1/models, without an `anthropic-version` header."""
        if "anthropic-version" in {k.lower() for k in headers}:
            return False
        return (method, path) in (("POST", "/v1/chat/completions"), ("GET", "/v1/models"))

    def is_stream(self, path: str, body: Mapping[str, Any]) -> bool:
        """`"stream": true` in the body."""
        return bool(body.get("stream"))

    def _usage(self, turn: ScriptedTurn, request: Mapping[str, Any]) -> dict[str, Any]:
        usage = turn.usage
        if usage is None:
            estimate = turn.final_usage()
            usage = Usage(
                input_tokens=len(json.dumps(request)) // 4, output_tokens=estimate.output_tokens
            )
        return {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        }

    def render_json(self, turn: ScriptedTurn, request: Mapping[str, Any], model: str) -> Any:
        """A `chat.completion` body."""
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if turn.thinking:
            message["reasoning_content"] = turn.thinking
        if turn.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                }
                for call in turn.tool_calls
            ]
        return {
            "id": "chatcmpl-mock",
            "object": "chat.completion",
            "created": 0,
            "model": request.get("model") or model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": _FINISH[turn.final_stop_reason()],
                }
            ],
            "usage": self._usage(turn, request),
        }

    def render_events(
        self, turn: ScriptedTurn, request: Mapping[str, Any], model: str
    ) -> list[bytes]:
        """The chunks of `turn`: role, reasoning, text pieces, tool calls (arguments cut into
        `ARGUMENT_PIECE`-character fragments), finish, usage, `[DONE]`; or, for a turn with an
        error, an in-stream `{"error": ...}` event after the text and nothing more."""
        base: dict[str, Any] = {
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": request.get("model") or model,
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return sse_frame({**base, "choices": [choice]})

        frames = [chunk({"role": "assistant", "content": ""})]
        if turn.thinking:
            frames.append(chunk({"reasoning_content": turn.thinking}))
        frames.extend(chunk({"content": piece}) for piece in turn.text_chunks())
        if turn.error is not None:
            return [*frames, sse_frame(self.render_error(turn.error)[1])]
        for index, call in enumerate(turn.tool_calls):
            head = {"index": index, "id": call.id, "type": "function"}
            frames.append(chunk({"tool_calls": [{**head, "function": {"name": call.name}}]}))
            arguments = json.dumps(call.arguments)
            for start in range(0, len(arguments), ARGUMENT_PIECE):
                piece = arguments[start : start + ARGUMENT_PIECE]
                fragment = {"index": index, "function": {"arguments": piece}}
                frames.append(chunk({"tool_calls": [fragment]}))
        frames.append(chunk({}, _FINISH[turn.final_stop_reason()]))
        options = request.get("stream_options")
        if isinstance(options, Mapping) and options.get("include_usage"):
            usage = {**base, "choices": [], "usage": self._usage(turn, request)}
            frames.append(sse_frame(usage))
        frames.append(sse_frame("[DONE]"))
        return frames

    def render_error(self, error: LLMError) -> tuple[int, Any, dict[str, str]]:
        """OpenAI's `{"error": {"message", "type", "param", "code"}}` with the error's status
        (500 when it has none) and `retry-after` in seconds when it has `retry_after`."""
        kind, code = "server_error", None
        for cls, cls_kind, cls_code in _ERROR_NAMES:
            if isinstance(error, cls):
                kind, code = cls_kind, cls_code
                break
        else:
            if error.status is not None and 400 <= error.status < 500:
                kind = "invalid_request_error"
        body = {"error": {"message": error.message, "type": kind, "param": None, "code": code}}
        headers: dict[str, str] = {}
        if error.retry_after is not None:
            headers["retry-after"] = f"{error.retry_after:g}"
        return error.status or 500, body, headers

    def render_models(self, models: list[str]) -> Any:
        """`{"object": "list", "data": [{"id", "object": "model", ...}]}`."""
        return {
            "object": "list",
            "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "mock"} for m in models
            ],
        }
