"""The Anthropic Messages wire format of the mock server (`POST /v1/messages`, `GET /v1/models`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agent_runtime.llm.errors import (
    AuthenticationError,
    LLMError,
    ModelNotFoundError,
    PermissionDeniedError,
    QuotaExceededError,
    RateLimitError,
)
from agent_runtime.messages import StopReason, Usage
from agent_runtime.testing._sse import sse_frame
from agent_runtime.testing.scripted import ScriptedTurn

_STOP_REASONS: dict[StopReason, str] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_use": "tool_use",
    "error": "refusal",
    "aborted": "end_turn",
}

_ERROR_TYPES: tuple[tuple[type[LLMError], str], ...] = (
    (AuthenticationError, "authentication_error"),
    (PermissionDeniedError, "permission_error"),
    (ModelNotFoundError, "not_found_error"),
    (RateLimitError, "rate_limit_error"),
)

_STATUS_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

REQUEST_ID_HEADER = "request-id"
"""The response header that carries the request id (not OpenAI's `x-request-id`): the official
SDK reads it into `Message._request_id` and `APIStatusError.request_id`."""

_MESSAGE_ID = "msg_mock"
_ARGUMENT_PIECES = 3
"""Tool arguments are streamed in this many `input_json_delta` fragments."""


def error_type(error: LLMError) -> str:
    """The API's `error.type` for one of our errors (by status, else by class)."""
    status = error.status or 500
    if status in _STATUS_TYPES:
        return _STATUS_TYPES[status]
    if isinstance(error, QuotaExceededError):
        return "billing_error"
    kind = next((name for cls, name in _ERROR_TYPES if isinstance(error, cls)), None)
    if kind is not None:
        return kind
    return "api_error" if status >= 500 else "invalid_request_error"


def error_body(error: LLMError) -> dict[str, Any]:
    """`{"type": "error", "error": {"type", "message"}, "request_id"}` for `error`."""
    return {
        "type": "error",
        "error": {"type": error_type(error), "message": error.message},
        "request_id": "req_mock",
    }


def _wire_usage(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": max(usage.input_tokens - usage.cached_input_tokens, 0),
        "cache_read_input_tokens": usage.cached_input_tokens,
        "cache_creation_input_tokens": 0,
        "output_tokens": usage.output_tokens,
    }


def _turn_usage(turn: ScriptedTurn, request: Mapping[str, Any]) -> Usage:
    if turn.usage is not None:
        return turn.usage
    estimate = turn.final_usage()
    return estimate.model_copy(update={"input_tokens": len(json.dumps(request)) // 4})


def _split(text: str, pieces: int) -> list[str]:
    size = max(-(-len(text) // pieces), 1)
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class AnthropicWire:
    """Anthropic's Messages API as the mock server speaks it.

    A turn renders as thinking (with its signature), then one text block (one `text_delta` per
    scripted chunk), then one `tool_use` block per call whose arguments arrive in several
    `input_json_delta` fragments; a `ping` follows `message_start`. Usage is split into
    `input_tokens` and `cache_read_input_tokens` so the adapter can add them back.
    """

    name = "anthropic"

    def base_url(self, root: str) -> str:
        """The API root itself: the adapter appends `/v1/messages`."""
        return root

    def matches(self, method: str, path: str, headers: Mapping[str, str]) -> bool:
        """`POST /v1/messages`, and `GET /v1/models` when it carries `anthropic-version`."""
        if method == "POST":
            return path == "/v1/messages"
        return method == "GET" and path == "/v1/models" and "anthropic-version" in headers

    def is_stream(self, path: str, body: Mapping[str, Any]) -> bool:
        """Whether the body says `"stream": true`."""
        return body.get("stream") is True

    def _blocks(self, turn: ScriptedTurn) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if turn.thinking or turn.thinking_signature:
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": turn.thinking,
                    "signature": turn.thinking_signature or "",
                }
            )
        if turn.text:
            blocks.append({"type": "text", "text": turn.text})
        for call in turn.tool_calls:
            blocks.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            )
        return blocks

    def render_json(self, turn: ScriptedTurn, request: Mapping[str, Any], model: str) -> Any:
        """A complete `message` object."""
        return {
            "id": _MESSAGE_ID,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": self._blocks(turn),
            "stop_reason": _STOP_REASONS[turn.final_stop_reason()],
            "stop_sequence": None,
            "usage": _wire_usage(_turn_usage(turn, request)),
        }

    def render_events(
        self, turn: ScriptedTurn, request: Mapping[str, Any], model: str
    ) -> list[bytes]:
        """`message_start`, `ping`, the content blocks, `message_delta`, `message_stop` (or,
        when the turn has an error, an `error` event after the text)."""
        usage = _wire_usage(_turn_usage(turn, request))
        start_usage = {**usage, "output_tokens": 1}
        message: dict[str, Any] = {
            "id": _MESSAGE_ID,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": start_usage,
        }
        events: list[tuple[str, Any]] = [
            ("message_start", {"type": "message_start", "message": message}),
            ("ping", {"type": "ping"}),
        ]
        index = 0
        if turn.thinking or turn.thinking_signature:
            deltas: list[dict[str, Any]] = []
            if turn.thinking:
                deltas.append({"type": "thinking_delta", "thinking": turn.thinking})
            if turn.thinking_signature:
                deltas.append({"type": "signature_delta", "signature": turn.thinking_signature})
            events += _block(index, {"type": "thinking", "thinking": "", "signature": ""}, deltas)
            index += 1
        pieces = turn.text_chunks()
        if pieces:
            deltas = [{"type": "text_delta", "text": piece} for piece in pieces]
            events += _block(index, {"type": "text", "text": ""}, deltas)
            index += 1
        if turn.error is not None:
            events.append(("error", error_body(turn.error)))
            return [sse_frame(event) for event in events]
        for call in turn.tool_calls:
            start = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in _split(json.dumps(call.arguments), _ARGUMENT_PIECES)
            ]
            events += _block(index, start, deltas)
            index += 1
        stop = {"stop_reason": _STOP_REASONS[turn.final_stop_reason()], "stop_sequence": None}
        end_usage = {"output_tokens": usage["output_tokens"]}
        events.append(
            ("message_delta", {"type": "message_delta", "delta": stop, "usage": end_usage})
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return [sse_frame(event) for event in events]

    def render_error(self, error: LLMError) -> tuple[int, Any, dict[str, str]]:
        """The error's status with the API's error body; `retry-after` when it has one."""
        headers: dict[str, str] = {}
        if error.retry_after is not None:
            headers["retry-after"] = f"{error.retry_after:g}"
        return error.status or 500, error_body(error), headers

    def render_models(self, models: list[str]) -> Any:
        """One page of `GET /v1/models`."""
        data = [
            {
                "type": "model",
                "id": model,
                "display_name": model,
                "created_at": "2025-01-01T00:00:00Z",
            }
            for model in models
        ]
        return {
            "data": data,
            "has_more": False,
            "first_id": models[0] if models else None,
            "last_id": models[-1] if models else None,
        }


def _block(
    index: int, start: dict[str, Any], deltas: list[dict[str, Any]]
) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = [
        (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
    ]
    events += [
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        for delta in deltas
    ]
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events
