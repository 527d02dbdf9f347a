"""The Gemini (Generative Language API, generateContent) wire format of the mock server."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

from agent_runtime.llm.errors import ContextLengthExceededError, LLMError, QuotaExceededError
from agent_runtime.messages import StopReason
from agent_runtime.testing._sse import sse_frame
from agent_runtime.testing.scripted import ScriptedTurn

_GENERATE = re.compile(r"/v1beta/models/[^/:]+:(generateContent|streamGenerateContent)")
_FINISH: dict[StopReason, str] = {
    "stop": "STOP",
    "tool_use": "STOP",
    "length": "MAX_TOKENS",
    "error": "OTHER",
    "aborted": "OTHER",
}
_QUOTA = "exceeded your current quota"
_CONTEXT = "input token count"
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def is_base64(value: str) -> bool:
    """Whether `value` is base64 as Gemini's `bytes` fields take it: the standard or URL-safe
    alphabet, padding optional, no stray characters or non-zero trailing bits (the official SDK
    rejects those too)."""
    standard = value.replace("-", "+").replace("_", "/")
    padded = standard + "=" * (-len(standard) % 4)
    try:
        decoded = base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        return False
    return base64.b64encode(decoded).decode("ascii") == padded


def _bad_signatures(request: Mapping[str, Any]) -> list[tuple[str, str]]:
    """`(field path, value)` of each thought signature in the request that is not base64."""
    bad: list[tuple[str, str]] = []
    contents = request.get("contents")
    for i, content in enumerate(contents if isinstance(contents, list) else []):
        parts = content.get("parts") if isinstance(content, Mapping) else None
        for j, part in enumerate(parts if isinstance(parts, list) else []):
            if not isinstance(part, Mapping):
                continue
            for key in ("thoughtSignature", "thought_signature"):
                value = part.get(key)
                if value is not None and not (isinstance(value, str) and is_base64(value)):
                    bad.append((f"contents[{i}].parts[{j}].thought_signature", str(value)))
    return bad


def refusal(request: Mapping[str, Any], turn: ScriptedTurn | None) -> tuple[int, Any] | None:
    """What the server answers in place of the script entry, or None to play it.

    A request with a `thoughtSignature` that is not base64 gets the API's 400 INVALID_ARGUMENT
    naming the field (the signature is a proto `bytes` field). A scripted turn whose
    `thinking_signature` is not base64 is one Gemini could never send (its SDK would fail to
    parse it), so the mock answers 400 naming the script's mistake instead of serving it.
    """
    bad = _bad_signatures(request)
    if bad:
        field, value = bad[0]
        message = f"Invalid value at '{field}' (TYPE_BYTES), Base64 decoding failed for {value!r}"
        violations = [
            {"field": path, "description": f"Invalid value at '{path}' (TYPE_BYTES)"}
            for path, _ in bad
        ]
        details = [
            {"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": violations}
        ]
        return 400, _google_error(400, message, details)
    signature = turn.thinking_signature if turn is not None else None
    if signature and not is_base64(signature):
        message = (
            f"MockProviderServer cannot serve this script: thinking_signature {signature!r} is "
            "not base64, and Gemini's thought signatures always are (its SDK rejects others); "
            f"script a base64 one, e.g. {base64.b64encode(signature.encode()).decode()!r}"
        )
        return 400, _google_error(400, message)
    return None


def _google_error(
    code: int, message: str, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    inner: dict[str, Any] = {
        "code": code,
        "message": message,
        "status": _STATUS_NAMES.get(code, "UNKNOWN"),
    }
    if details:
        inner["details"] = details
    return {"error": inner}


class GeminiWire:
    """Gemini's `generateContent` / `streamGenerateContent?alt=sse` and `GET /v1beta/models`.

    A turn renders as Gemini answers: thought summaries as `thought: true` parts, the turn's
    `thinking_signature` as `thoughtSignature` on the first text or `functionCall` part after
    them (on an empty text part when there is none), each text chunk as its own stream event,
    each tool call whole in its own event (with the turn's id), then an event with the
    `finishReason` and `usageMetadata`. Errors use Google's `{"error": {code, message, status,
    details}}` body, `retry_after` as a `RetryInfo.retryDelay`. Thought signatures are base64 both
    ways (`refusal`): the mock refuses a request or a script with any other kind.
    """

    name = "gemini"

    def base_url(self, root: str) -> str:
        """The adapter appends `/v1beta/...` itself, so its base URL is the server root."""
        return root

    def matches(self, method: str, path: str, headers: Mapping[str, str]) -> bool:
        """`POST /v1beta/models/<m>:generateContent|:streamGenerateContent`, `GET
        /v1beta/models`."""
        if method == "GET":
            return path == "/v1beta/models"
        return method == "POST" and _GENERATE.fullmatch(path) is not None

    def is_stream(self, path: str, body: Mapping[str, Any]) -> bool:
        """Streaming is chosen by the method name in the path."""
        return path.endswith(":streamGenerateContent")

    def _parts(self, turn: ScriptedTurn) -> list[list[dict[str, Any]]]:
        """The turn's parts, grouped by the stream event that carries them."""
        groups: list[list[dict[str, Any]]] = []
        if turn.thinking:
            groups.append([{"text": turn.thinking, "thought": True}])
        for piece in turn.text_chunks():
            groups.append([{"text": piece}])
        for call in turn.tool_calls:
            groups.append(
                [{"functionCall": {"id": call.id, "name": call.name, "args": call.arguments}}]
            )
        if turn.thinking_signature:
            first = 1 if turn.thinking else 0
            if first < len(groups):
                groups[first][0]["thoughtSignature"] = turn.thinking_signature
            else:
                groups.append([{"text": "", "thoughtSignature": turn.thinking_signature}])
        return groups

    def _usage(self, turn: ScriptedTurn) -> dict[str, int]:
        usage = turn.final_usage()
        wire = {
            "promptTokenCount": usage.input_tokens,
            "candidatesTokenCount": usage.output_tokens,
            "totalTokenCount": usage.input_tokens + usage.output_tokens,
        }
        if usage.cached_input_tokens:
            wire["cachedContentTokenCount"] = usage.cached_input_tokens
        return wire

    def render_json(self, turn: ScriptedTurn, request: Mapping[str, Any], model: str) -> Any:
        """One `GenerateContentResponse` with every part, the finish reason and usage."""
        parts = [part for group in self._parts(turn) for part in group]
        return {
            "candidates": [
                {
                    "content": {"role": "model", "parts": parts},
                    "finishReason": _FINISH[turn.final_stop_reason()],
                    "index": 0,
                }
            ],
            "usageMetadata": self._usage(turn),
            "modelVersion": model,
            "responseId": "resp_mock",
        }

    def render_events(
        self, turn: ScriptedTurn, request: Mapping[str, Any], model: str
    ) -> list[bytes]:
        """One event per part group, then the finish event (or the error event)."""
        frames = [
            sse_frame(
                {
                    "candidates": [{"content": {"role": "model", "parts": group}, "index": 0}],
                    "modelVersion": model,
                    "responseId": "resp_mock",
                }
            )
            for group in self._parts(turn)
        ]
        if turn.error is not None:
            frames.append(sse_frame(self._error_body(turn.error)))
            return frames
        frames.append(
            sse_frame(
                {
                    "candidates": [
                        {
                            "content": {"role": "model", "parts": []},
                            "finishReason": _FINISH[turn.final_stop_reason()],
                            "index": 0,
                        }
                    ],
                    "usageMetadata": self._usage(turn),
                    "modelVersion": model,
                    "responseId": "resp_mock",
                }
            )
        )
        return frames

    def _error_body(self, error: LLMError) -> dict[str, Any]:
        code = error.status or 500
        message = error.message
        if isinstance(error, QuotaExceededError) and _QUOTA not in message.lower():
            message = f"You {_QUOTA}, please check your plan and billing details. {message}"
        if isinstance(error, ContextLengthExceededError) and _CONTEXT not in message.lower():
            message = f"The {_CONTEXT} exceeds the maximum number of tokens allowed. {message}"
        details = None
        if error.retry_after is not None:
            details = [
                {
                    "@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": f"{error.retry_after:g}s",
                }
            ]
        return _google_error(code, message, details)

    def render_error(self, error: LLMError) -> tuple[int, Any, dict[str, str]]:
        """Google's error body; `retry_after` travels in the body, as Gemini sends it."""
        return error.status or 500, self._error_body(error), {}

    def render_models(self, models: list[str]) -> Any:
        """`{"models": [{"name": "models/<m>", "supportedGenerationMethods": [...]}, ...]}`."""
        return {
            "models": [
                {
                    "name": f"models/{m}",
                    "displayName": m,
                    "supportedGenerationMethods": ["generateContent", "countTokens"],
                }
                for m in models
            ]
        }
