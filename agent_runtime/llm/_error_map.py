"""Mapping provider failures (HTTP statuses, error bodies, in-stream error events) to LLMErrors.

Done once, here, for every adapter. Bodies are parsed leniently: nested `{"error": {...}}`,
flat `{"message", "type", "code"}`, `{"detail": ...}`, a list around any of those, or text.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Mapping
from typing import Any

from agent_runtime.llm.errors import (
    AuthenticationError,
    ContextLengthExceededError,
    InvalidRequestError,
    LLMError,
    ModelNotFoundError,
    PermissionDeniedError,
    ProviderError,
    QuotaExceededError,
    RateLimitError,
)

_CONTEXT_MARKERS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "input token count",
    "exceeds the maximum number of tokens",
    "string_above_max_length",
    "request_too_large",
)
_QUOTA_MARKERS = ("insufficient_quota", "billing", "credit balance", "exceeded your current quota")
# A 500 whose body says one of these is the server rejecting the request, not failing
# (llama-cpp-python answers a body that fails its pydantic validation, or a tool_choice
# naming no tool of the request, with HTTP 500).
_INVALID_MARKERS = (
    "validation error",
    "invalid request",
    "invalid_request",
    "validationerror",
    "not found in tools",
)

MAX_MESSAGE_CHARS = 300
"""Error messages are cut to this many characters (the whole body stays in `LLMError.body`):
some servers answer a bad request with a kilobytes-long validation dump."""

# Error types named in bodies and in-stream error events, to a status when none came with them.
_TYPE_STATUS = {
    "authentication_error": 401,
    "invalid_api_key": 401,
    "unauthenticated": 401,
    "permission_error": 403,
    "permission_denied": 403,
    "not_found_error": 404,
    "not_found": 404,
    "model_not_found": 404,
    "invalid_request_error": 400,
    "invalid_argument": 400,
    "failed_precondition": 400,
    "context_length_exceeded": 400,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "resource_exhausted": 429,
    "insufficient_quota": 429,
    "overloaded_error": 529,
    "billing_error": 402,
    "timeout_error": 504,
    "api_error": 500,
    "server_error": 500,
    "internal": 500,
    "unavailable": 503,
    "deadline_exceeded": 504,
}

_REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-goog-request-id", "openai-request-id")


def parse_body(raw: bytes | str | None) -> Any:
    """The error body as JSON when it is JSON, else the text (None when empty)."""
    if raw is None:
        return None
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def describe_body(body: Any) -> tuple[str, str | None, str | None]:
    """`(message, type, code)` found in an error body of any common shape."""
    if isinstance(body, list) and body:
        return describe_body(body[0])
    if isinstance(body, str):
        return body.strip()[:500], None, None
    if not isinstance(body, Mapping):
        return "", None, None
    inner: Any = body.get("error", body)
    if isinstance(inner, str):
        return inner, _text(body.get("type")), _text(body.get("code"))
    if not isinstance(inner, Mapping):
        inner = body
    detail = inner.get("detail")
    message = inner.get("message") or (detail if isinstance(detail, str) else None)
    if message is None and isinstance(detail, Mapping | list):
        message, kind, code = describe_body(detail)
        return message, kind, code
    kind = _text(inner.get("type")) or _text(inner.get("status"))
    code = _text(inner.get("code"))
    return _text(message) or "", kind, code


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return str(value)


def parse_retry_after(headers: Mapping[str, str] | None, body: Any = None) -> float | None:
    """Seconds to wait, from `retry-after-ms`, `retry-after` (seconds or HTTP date) or a
    Gemini `RetryInfo.retryDelay` in the body; None when nothing says."""
    if headers:
        lower = {k.lower(): v for k, v in headers.items()}
        if "retry-after-ms" in lower:
            try:
                return max(float(lower["retry-after-ms"]) / 1000.0, 0.0)
            except ValueError:
                pass
        if "retry-after" in lower:
            value = lower["retry-after"].strip()
            try:
                return max(float(value), 0.0)
            except ValueError:
                try:
                    parsed = email.utils.parsedate_to_datetime(value)
                except (TypeError, ValueError):
                    parsed = None
                if parsed is not None:
                    return max(parsed.timestamp() - time.time(), 0.0)
    return _retry_delay_in_body(body)


def _retry_delay_in_body(body: Any) -> float | None:
    if isinstance(body, list) and body:
        body = body[0]
    if not isinstance(body, Mapping):
        return None
    inner = body.get("error", body)
    details = inner.get("details") if isinstance(inner, Mapping) else None
    for detail in details if isinstance(details, list) else []:
        if isinstance(detail, Mapping) and "retryDelay" in detail:
            match = re.fullmatch(r"\s*([0-9.]+)s\s*", str(detail["retryDelay"]))
            if match:
                return float(match.group(1))
    return None


def request_id_of(headers: Mapping[str, str] | None) -> str | None:
    """The provider's request id from the response headers, if any."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    return next((lower[h] for h in _REQUEST_ID_HEADERS if h in lower), None)


def map_error(
    status: int | None,
    body: Any,
    *,
    provider: str,
    headers: Mapping[str, str] | None = None,
    url: str | None = None,
) -> LLMError:
    """The LLMError for a failed call: an HTTP status with its body, or (status None) an
    in-stream error event whose body names the error type.

    The message is at most `MAX_MESSAGE_CHARS` long (whitespace collapsed); a 404 names `url`,
    the request that was called (`POST http://host/path`), since "Not Found" alone cannot tell
    a wrong model from a wrong `base_url`.
    """
    message, kind, code = describe_body(body)
    message = short_message(message)
    markers = " ".join(x for x in (message, kind, code) if x).lower()
    if status is None:
        status = next(
            (_TYPE_STATUS[k.lower()] for k in (kind, code) if k and k.lower() in _TYPE_STATUS),
            500,
        )
    facts: dict[str, Any] = {
        "status": status,
        "provider": provider,
        "request_id": request_id_of(headers),
        "body": body,
        "retry_after": parse_retry_after(headers, body),
    }
    text = message or f"HTTP {status} from {provider}"
    if code or kind:
        text = f"{text} [{code or kind}]"
    if status == 404 and url:
        text = f"{text}: {url}"
    return _classify(status, markers, facts["retry_after"])(text, **facts)


def short_message(message: str) -> str:
    """`message` with whitespace collapsed, cut to `MAX_MESSAGE_CHARS` (ending in "...")."""
    if len(message) <= MAX_MESSAGE_CHARS and "\n" not in message:
        return message
    flat = " ".join(message.split())
    if len(flat) <= MAX_MESSAGE_CHARS:
        return flat
    return flat[: MAX_MESSAGE_CHARS - 3].rstrip() + "..."


def _classify(status: int, markers: str, retry_after: float | None) -> type[LLMError]:
    if status in (400, 413, 422, 500) and any(m in markers for m in _CONTEXT_MARKERS):
        return ContextLengthExceededError
    if status == 500 and any(m in markers for m in _INVALID_MARKERS):
        return InvalidRequestError
    if status == 402:
        return QuotaExceededError
    if status == 429:
        if "insufficient_quota" in markers or (
            retry_after is None and any(m in markers for m in _QUOTA_MARKERS)
        ):
            return QuotaExceededError
        return RateLimitError
    if status == 400 and "credit balance" in markers:
        return QuotaExceededError
    if status == 401:
        return AuthenticationError
    if status == 403:
        return PermissionDeniedError
    if status == 404:
        return ModelNotFoundError
    if status in (408, 409) or status >= 500:
        return ProviderError
    return InvalidRequestError
