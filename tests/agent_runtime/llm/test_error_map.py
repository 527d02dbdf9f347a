"""Mapping statuses and bodies to LLMErrors, and reading every retry-after form."""

from __future__ import annotations

import email.utils
import time

import pytest

from agent_runtime.llm import (
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
from agent_runtime.llm._error_map import describe_body, map_error, parse_retry_after

ROWS = [
    (
        400,
        {"error": {"message": "bad field", "type": "invalid_request_error"}},
        InvalidRequestError,
    ),
    (
        400,
        {"error": {"message": "This model's maximum context length is 8192 tokens"}},
        ContextLengthExceededError,
    ),
    (
        400,
        {"error": {"type": "invalid_request_error", "message": "prompt is too long"}},
        ContextLengthExceededError,
    ),
    (
        413,
        {"error": {"type": "request_too_large", "message": "too big"}},
        ContextLengthExceededError,
    ),
    (401, {"error": {"message": "Incorrect API key"}}, AuthenticationError),
    (403, {"error": {"message": "no access"}}, PermissionDeniedError),
    (404, {"error": {"message": "model not found"}}, ModelNotFoundError),
    (429, {"error": {"message": "slow down", "type": "rate_limit_error"}}, RateLimitError),
    (429, {"error": {"message": "quota", "code": "insufficient_quota"}}, QuotaExceededError),
    (402, {"detail": "Payment required"}, QuotaExceededError),
    (500, "internal error", ProviderError),
    (503, {"error": {"message": "unavailable"}}, ProviderError),
    (
        529,
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        ProviderError,
    ),
    (422, {"detail": [{"msg": "field required"}]}, InvalidRequestError),
]


@pytest.mark.parametrize(("status", "body", "cls"), ROWS)
def test_status_and_body_map_to_the_right_error(
    status: int, body: object, cls: type[LLMError]
) -> None:
    error = map_error(status, body, provider="p", headers={"x-request-id": "req_1"})
    assert type(error) is cls
    assert error.status == status
    assert error.provider == "p"
    assert error.request_id == "req_1"
    assert error.retryable is (cls in (RateLimitError, ProviderError))
    assert error.code == cls.default_code


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"error": {"message": "nested"}}, "nested"),
        ({"message": "flat", "type": "t"}, "flat"),
        ({"detail": "detail text"}, "detail text"),
        ([{"error": {"message": "in a list"}}], "in a list"),
        ("plain text body", "plain text body"),
        ({"error": "just a string"}, "just a string"),
    ],
)
def test_error_bodies_are_parsed_leniently(body: object, message: str) -> None:
    assert describe_body(body)[0] == message


def test_in_stream_error_is_mapped_by_its_type() -> None:
    overloaded = map_error(
        None, {"type": "error", "error": {"type": "overloaded_error"}}, provider="a"
    )
    assert isinstance(overloaded, ProviderError) and overloaded.status == 529
    limited = map_error(
        None, {"error": {"code": "rate_limit_exceeded", "message": "x"}}, provider="o"
    )
    assert isinstance(limited, RateLimitError)
    unknown = map_error(None, {"error": {"message": "??"}}, provider="o")
    assert isinstance(unknown, ProviderError) and unknown.retryable


def test_retry_after_ms_wins() -> None:
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5


def test_retry_after_seconds() -> None:
    assert parse_retry_after({"Retry-After": "7"}) == 7.0


def test_retry_after_http_date() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    delay = parse_retry_after({"retry-after": when})
    assert delay is not None and 25 <= delay <= 31


def test_retry_delay_in_a_gemini_body() -> None:
    body = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}],
        }
    }
    assert parse_retry_after({}, body) == 12.0
    error = map_error(429, body, provider="gemini")
    assert isinstance(error, RateLimitError) and error.retry_after == 12.0


def test_no_hint_means_none() -> None:
    assert parse_retry_after({}) is None
    assert parse_retry_after({"retry-after": "garbage"}) is None


def test_error_message_names_its_facts() -> None:
    error = map_error(
        429, {"error": {"message": "slow"}}, provider="p", headers={"retry-after": "3"}
    )
    text = str(error)
    assert "slow" in text and "status=429" in text and "retry_after=3s" in text
