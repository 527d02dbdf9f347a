"""LLM errors: one root, one subclass per condition, each carrying provider, status and code.

The tree:

    LLMError
    ├── AuthenticationError            401, never retried
    ├── PermissionDeniedError          403, never retried
    ├── RateLimitError                 429, retryable
    ├── QuotaExceededError             429 insufficient_quota / 402
    ├── InvalidRequestError            400 / 422, never retried
    │   └── ContextLengthExceededError
    ├── ModelNotFoundError             404
    ├── ProviderError                  5xx / 529, retryable
    ├── NetworkError                   connection, timeouts, cut streams, retryable
    ├── CapabilityNotSupportedError
    ├── StructuredOutputError
    └── TruncatedResponseError

`is_retryable(error)` is the one rule of what is retried, by `RetryingModel` and by the agent
loop alike.
"""

from __future__ import annotations

from typing import Any, ClassVar

from agent_runtime._errors import AgentRuntimeError, InvalidOutput


class LLMError(AgentRuntimeError):
    """A model call failed.

    Attributes:
        code: a stable machine-readable code (`rate_limited`, `context_length_exceeded`, ...).
        retryable: whether the same request may succeed if retried later.
        status: the HTTP status, if the failure came with one.
        retry_after: seconds the provider asked us to wait, if it said.
        provider: which provider answered (`openai`, `anthropic`, `gemini`, ...).
        request_id: the provider's request id, for support tickets.
        body: the provider's error body (parsed JSON or text), if any.
    """

    default_code: ClassVar[str] = "llm_error"
    default_retryable: ClassVar[bool] = False
    default_status: ClassVar[int | None] = None

    def __init__(
        self,
        message: str,
        retry_after: float | None = None,
        *,
        code: str | None = None,
        retryable: bool | None = None,
        status: int | None = None,
        provider: str | None = None,
        request_id: str | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after
        self.code = code or self.default_code
        self.retryable = self.default_retryable if retryable is None else retryable
        self.status = self.default_status if status is None else status
        self.provider = provider
        self.request_id = request_id
        self.body = body

    def __str__(self) -> str:
        facts = [f"code={self.code}"]
        if self.provider:
            facts.append(f"provider={self.provider}")
        if self.status is not None:
            facts.append(f"status={self.status}")
        if self.retry_after is not None:
            facts.append(f"retry_after={self.retry_after:g}s")
        if self.request_id:
            facts.append(f"request_id={self.request_id}")
        return f"{self.message} ({', '.join(facts)})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r}, status={self.status})"


class AuthenticationError(LLMError):
    """The API key is missing, wrong or expired (HTTP 401)."""

    default_code = "authentication_failed"
    default_status = 401


class PermissionDeniedError(LLMError):
    """The key is valid but may not use this model or feature (HTTP 403)."""

    default_code = "permission_denied"
    default_status = 403


class RateLimitError(LLMError):
    """Too many requests (HTTP 429); retryable, honouring `retry_after`."""

    default_code = "rate_limited"
    default_retryable = True
    default_status = 429


class QuotaExceededError(LLMError):
    """The account's quota or credit is exhausted (429 insufficient_quota, 402); not retryable."""

    default_code = "quota_exceeded"
    default_status = 429


class InvalidRequestError(LLMError):
    """The provider rejected the request as malformed (HTTP 400, 422)."""

    default_code = "invalid_request"
    default_status = 400


class ContextLengthExceededError(InvalidRequestError):
    """The prompt does not fit the model's context window."""

    default_code = "context_length_exceeded"


class ModelNotFoundError(LLMError):
    """The model (or endpoint) does not exist (HTTP 404)."""

    default_code = "model_not_found"
    default_status = 404


class ProviderError(LLMError):
    """The provider failed (HTTP 5xx, Anthropic 529 overloaded); retryable."""

    default_code = "provider_error"
    default_retryable = True
    default_status = 500


class NetworkError(LLMError):
    """The connection failed, timed out or ended early (socket, DNS, TLS); retryable, except
    a connection refused by a server that never answered (`code="connection_refused"`).

    Attributes:
        elapsed: seconds the failed attempt took, when known (a timeout's message says it too).
    """

    default_code = "network_error"
    default_retryable = True
    elapsed: float | None = None


class CapabilityNotSupportedError(LLMError):
    """The request needs a capability the model lacks; raised before any HTTP call."""

    default_code = "capability_not_supported"


class StructuredOutputError(LLMError, InvalidOutput):
    """A structured answer did not validate against the requested type (an `InvalidOutput`,
    as a run's `OutputValidationError` is).

    Attributes:
        errors: pydantic's validation errors.
        raw: the text the model returned.
    """

    default_code = "structured_output_invalid"

    def __init__(self, message: str, *, errors: list[Any], raw: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.errors = errors
        self.raw = raw


class TruncatedResponseError(LLMError):
    """The answer was cut off by the output token limit."""

    default_code = "truncated"


NEVER_RETRIED: tuple[type[LLMError], ...] = (
    AuthenticationError,
    PermissionDeniedError,
    InvalidRequestError,
)
"""Errors never retried, even when marked retryable: retrying cannot fix a bad key, a missing
permission or a bad request (`ContextLengthExceededError` is an `InvalidRequestError`)."""


def is_retryable(error: LLMError) -> bool:
    """Whether `error` may be retried: it is marked `retryable` and is not of a kind in
    `NEVER_RETRIED`. The one rule of `RetryingModel` and of the agent loop's retries."""
    return error.retryable and not isinstance(error, NEVER_RETRIED)
