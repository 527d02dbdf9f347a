"""The LLM proxy: a ChatModel whose calls run on a gateway's server-side model profile.

The wire of `POST /v1/llm/stream` (both sides import it from here):

- request body: `ProxyCall` as JSON, `{"profile": "<name>", "request": <ChatRequest>}`;
- answer: `text/event-stream`; each `data:` event without a name is one `StreamChunk`, the
  provider's delta as the server's model yielded it (never the growing message: a token costs
  its own bytes, not the answer's); fields at their default are left out, `type` never;
- the stream ends with one `event: done` (a clean end) or one `event: error` whose data is an
  error envelope (`error_envelope`); a stream that ends with neither was cut;
- a request refused before streaming (bad input, unknown profile, no authentication) is
  answered with an HTTP 4xx/5xx status and an error envelope (or the gateway's own body).

Errors keep their class across the proxy: the envelope names the `LLMError` subclass (the
nearest one this module knows, for a subclass of one) with its code, retryable flag, status,
retry_after, provider and request id; never the provider's raw body. An exception that is no
`LLMError` crosses as a generic `LLMError` (code `proxy_internal_error`) without its detail.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agent_runtime.llm._error_map import map_error, parse_body
from agent_runtime.llm._sse import SseEventSource
from agent_runtime.llm._transport import Transport, resolve_api_key
from agent_runtime.llm.base import BaseChatModel
from agent_runtime.llm.errors import (
    AuthenticationError,
    CapabilityNotSupportedError,
    ContextLengthExceededError,
    InvalidRequestError,
    LLMError,
    ModelNotFoundError,
    NetworkError,
    PermissionDeniedError,
    ProviderError,
    QuotaExceededError,
    RateLimitError,
    StructuredOutputError,
    TruncatedResponseError,
)
from agent_runtime.llm.types import ChatRequest, ModelInfo, StreamChunk

__all__ = [
    "INTERNAL_ERROR_CODE",
    "PROXY_PATH",
    "ProxyCall",
    "ProxyModel",
    "encode_chunk",
    "error_envelope",
    "error_from_envelope",
    "proxy",
]

PROXY_PATH = "/v1/llm/stream"
"""Where the gateway serves the proxy, under its root URL."""

INTERNAL_ERROR_CODE = "proxy_internal_error"
"""The code of the generic error a server-side failure that is no `LLMError` becomes."""

PROVIDER = "proxy"

# Every class of agent_runtime.llm.errors, by the name the envelope carries. A subclass of
# these (a provider's or a plugin's own) crosses as the nearest of them in its MRO.
_ERROR_CLASSES: dict[str, type[LLMError]] = {
    cls.__name__: cls
    for cls in (
        LLMError,
        AuthenticationError,
        PermissionDeniedError,
        RateLimitError,
        QuotaExceededError,
        InvalidRequestError,
        ContextLengthExceededError,
        ModelNotFoundError,
        ProviderError,
        NetworkError,
        CapabilityNotSupportedError,
        StructuredOutputError,
        TruncatedResponseError,
    )
}

_CHUNK: TypeAdapter[StreamChunk] = TypeAdapter(StreamChunk)


class ProxyCall(BaseModel):
    """The body of `POST /v1/llm/stream`: which server-side profile runs which request."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    profile: str = Field(min_length=1)
    request: ChatRequest


def encode_chunk(chunk: StreamChunk) -> str:
    """One chunk as the compact JSON of a proxy event (`type` always, defaults left out)."""
    fields = chunk.model_dump_json(exclude_defaults=True)  # `type` is a default too
    if fields == "{}":
        return f'{{"type":"{chunk.type}"}}'
    return f'{{"type":"{chunk.type}",{fields[1:]}'


def _decode_chunk(data: str) -> StreamChunk:
    return _CHUNK.validate_json(data)


class _ErrorFacts(BaseModel):
    """An error envelope's `error` object, leniently read (unknown keys are ignored)."""

    type: str = "LLMError"
    message: str = "the LLM proxy failed"
    code: str | None = None
    retryable: bool | None = None
    status: int | None = None
    retry_after: float | None = None
    provider: str | None = None
    request_id: str | None = None


def error_envelope(error: BaseException) -> dict[str, Any]:
    """The JSON envelope `{"error": {...}}` that carries `error` across the proxy.

    An `LLMError` keeps its class (the nearest known one), message and facts, but not its raw
    provider body; anything else becomes a generic `LLMError` with no detail of it.
    """
    if not isinstance(error, LLMError):
        return {
            "error": {
                "type": "LLMError",
                "message": "the LLM proxy failed with an internal error on the server "
                "(its log has the details)",
                "code": INTERNAL_ERROR_CODE,
                "retryable": False,
            }
        }
    name = next(c.__name__ for c in type(error).__mro__ if c.__name__ in _ERROR_CLASSES)
    facts = {
        "type": name,
        "message": error.message,
        "code": error.code,
        "retryable": error.retryable,
        "status": error.status,
        "retry_after": error.retry_after,
        "provider": error.provider,
        "request_id": error.request_id,
    }
    return {"error": {k: v for k, v in facts.items() if v is not None}}


def error_from_envelope(body: Any) -> LLMError | None:
    """The `LLMError` an error envelope carries (None when `body` is not one)."""
    if not isinstance(body, dict) or not isinstance(body.get("error"), dict):
        return None
    raw = body["error"]
    if "type" not in raw or "message" not in raw:
        return None
    facts = _ErrorFacts.model_validate({k: raw[k] for k in _ErrorFacts.model_fields if k in raw})
    cls = _ERROR_CLASSES.get(facts.type, LLMError)
    options: dict[str, Any] = {
        "code": facts.code,
        "retryable": facts.retryable,
        "status": facts.status,
        "provider": facts.provider or PROVIDER,
        "request_id": facts.request_id,
    }
    if cls is StructuredOutputError:  # its raw answer stays on the server
        return StructuredOutputError(
            facts.message, errors=[], raw="", retry_after=facts.retry_after, **options
        )
    return cls(facts.message, facts.retry_after, **options)


class _ProxyTransport(Transport):
    """The proxy's HTTP: error statuses carrying an envelope become its error."""

    def error_for(
        self,
        status: int | None,
        raw: bytes | str | None,
        headers: Any,
        url: str | None = None,
    ) -> LLMError:
        body = parse_body(raw)
        carried = error_from_envelope(body)
        if carried is not None:
            return carried
        return map_error(status, body, provider=self.provider, headers=headers, url=url)

    def stream_error(self, body: Any, request_id: str | None = None) -> LLMError:
        carried = error_from_envelope(body)
        if carried is None:
            return NetworkError(
                f"the LLM proxy sent an error event that is not an error envelope: "
                f"{str(body)[:200]!r}",
                provider=self.provider,
            )
        return carried


class ProxyModel(BaseChatModel):
    """A ChatModel whose calls run on profile `profile` of the gateway at `url`.

    For clients without provider keys: the gateway holds them and runs its model; this side
    sends the `ChatRequest` and rebuilds the answer from the streamed deltas, so agents,
    middleware (`RetryingModel`, ...) and `generate` work as with any ChatModel.

    Guarantees:
    - `stream` yields the server model's chunks in order, unchanged; it ends after the
      server's `done` marker; a stream cut before it raises a retryable `NetworkError`.
    - Errors keep their class: a server-side `RateLimitError` is a `RateLimitError` here,
      retryable, with its `retry_after`; every class of `agent_runtime.llm.errors` crosses.
    - Cancelling the consuming task, or aborting its signal, closes the HTTP response at once;
      the gateway sees the disconnect and cancels its own model call.
    - `auth_token` (a string, or a callable called on every request) is sent as a bearer
      token; a 401/403 of the gateway raises `AuthenticationError`/`PermissionDeniedError`.
    - `info` is provider `proxy`, model `profile`, every capability (the server's model
      checks its own, and its `CapabilityNotSupportedError` crosses the proxy).
    """

    def __init__(
        self,
        url: str,
        *,
        auth_token: str | Callable[[], str] | None,
        profile: str,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        request_timeout: float | None = 600.0,
        idle_timeout: float | None = 120.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not profile:
            raise ValueError("proxy(...) needs the name of a model profile of the gateway")
        base = url.rstrip("/")
        if base.endswith(PROXY_PATH):
            base = base[: -len(PROXY_PATH)]
        self._auth_token = auth_token
        self._profile = profile
        self._info = ModelInfo(provider=PROVIDER, model=profile)
        self._transport = _ProxyTransport(
            base_url=base,
            provider=PROVIDER,
            headers=self._headers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            idle_timeout=idle_timeout,
            transport=transport,
        )

    @property
    def info(self) -> ModelInfo:
        """Provider `proxy`, the profile as model name, every capability."""
        return self._info

    @property
    def base_url(self) -> str:
        """The gateway's root URL."""
        return self._transport.base_url

    def _headers(self) -> dict[str, str]:
        token = resolve_api_key(self._auth_token)
        return {"authorization": f"Bearer {token}"} if token else {}

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        body = {"profile": self._profile, "request": request.model_dump(mode="json")}
        events = SseEventSource(self._transport, PROXY_PATH, body)
        async with events:
            async for event in events:
                kind = event.event
                if kind == "error":
                    raise events.error(events.json(event))
                if kind == "done":
                    return
                yield _decode_chunk(event.data)
        raise NetworkError(
            "the LLM proxy's stream ended before its end marker (connection cut mid-answer)",
            provider=PROVIDER,
        )

    async def aclose(self) -> None:
        """Close the pooled HTTP client of the running event loop."""
        await self._transport.aclose()


def proxy(
    url: str,
    *,
    auth_token: str | Callable[[], str] | None,
    profile: str,
    timeout: float = 60.0,
    connect_timeout: float = 10.0,
    request_timeout: float | None = 600.0,
    idle_timeout: float | None = 120.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> ProxyModel:
    """A ChatModel running every call on model profile `profile` of the agent-runtime gateway
    at `url` (its root, e.g. `http://127.0.0.1:8000`), through `POST /v1/llm/stream`.

    See `ProxyModel` for the guarantees; the timeouts are those of the HTTP adapters.

    Raises:
        ValueError: `profile` is empty.
    """
    return ProxyModel(
        url,
        auth_token=auth_token,
        profile=profile,
        timeout=timeout,
        connect_timeout=connect_timeout,
        request_timeout=request_timeout,
        idle_timeout=idle_timeout,
        transport=transport,
    )
