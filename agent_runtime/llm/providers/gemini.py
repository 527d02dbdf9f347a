"""The Gemini adapter: `gemini(model, api_key)` over Google's Generative Language API.

How our transcript maps onto `generateContent` (system instruction, tool-call ids, thought
signatures, tools, reasoning, finish reasons, usage) is documented, and done, in
`agent_runtime.llm.providers._gemini_convert`. This module adds the HTTP: `:generateContent` and
`:streamGenerateContent?alt=sse` under `/v1beta/models/<model>`, the key in `x-goog-api-key`,
and errors: Google's `{"error": {"code", "message", "status", "details"}}` body (also wrapped in a
list) is mapped by the shared error map, `RetryInfo.retryDelay` giving `retry_after`; a 400
`API_KEY_INVALID` (Gemini's answer to a wrong key) becomes `AuthenticationError`. Gemini has no
`[DONE]`: the `FinishDelta` is yielded when the stream ends after a chunk with a `finishReason`
(usage may come in a later chunk); a stream that ends without one raises `NetworkError`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Iterator, Mapping

import httpx

from agent_runtime.config import ThinkingBudgets
from agent_runtime.llm._transport import Transport, resolve_api_key
from agent_runtime.llm.base import BaseChatModel
from agent_runtime.llm.builder import ChatResponseBuilder
from agent_runtime.llm.errors import (
    AuthenticationError,
    ContextLengthExceededError,
    InvalidRequestError,
    NetworkError,
)
from agent_runtime.llm.providers._gemini_convert import (
    PROVIDER,
    SYNTHETIC_CALL_ID_PREFIX,
    GeminiStreamDecoder,
    error_body,
    request_body,
)
from agent_runtime.llm.types import (
    ALL_CAPABILITIES,
    Capability,
    ChatRequest,
    ChatResponse,
    ModelInfo,
    ModelPricing,
    StreamChunk,
)

__all__ = ["DEFAULT_BASE_URL", "SYNTHETIC_CALL_ID_PREFIX", "GeminiModel", "gemini"]

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
MODELS_PATH = "/v1beta/models"
_FALLBACK_KEY_ENV = "GOOGLE_API_KEY"
_DEFAULT_KEY_ENV = "GEMINI_API_KEY"


class GeminiModel(BaseChatModel):
    """A Gemini model over the Generative Language API (build it with `gemini(...)`).

    Guarantees: the API key is resolved on every request (a callable is called each time, env
    vars re-read); `stream` yields exactly one `FinishDelta`, and only after Gemini's terminal
    `finishReason`; cancelling or aborting closes the HTTP response at once.
    """

    def __init__(
        self,
        model: str,
        api_key: str | Callable[[], str] | None = None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key_env: str = _DEFAULT_KEY_ENV,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        capabilities: Iterable[Capability] | None = None,
        pricing: ModelPricing | None = None,
        thinking_budgets: ThinkingBudgets | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.model = model.removeprefix("models/")
        self._api_key = api_key
        self._api_key_env = api_key_env
        self._budgets = thinking_budgets or ThinkingBudgets()
        self._info = ModelInfo(
            provider=PROVIDER,
            model=self.model,
            capabilities=frozenset(capabilities) if capabilities is not None else ALL_CAPABILITIES,
            pricing=pricing,
        )
        self._transport = Transport(
            base_url=base_url,
            provider=PROVIDER,
            headers=self._headers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            transport=transport,
        )

    @property
    def info(self) -> ModelInfo:
        """Provider `gemini`, the model name (without `models/`), capabilities and pricing."""
        return self._info

    @property
    def base_url(self) -> str:
        """The API root requests go to (without the version path)."""
        return self._transport.base_url

    def _key_env_names(self) -> list[str]:
        names = [self._api_key_env]
        if self._api_key_env == _DEFAULT_KEY_ENV:
            names.append(_FALLBACK_KEY_ENV)
        return names

    def _headers(self) -> dict[str, str]:
        key = resolve_api_key(self._api_key)
        if self._api_key is None:
            key = next((os.environ[n] for n in self._key_env_names() if os.environ.get(n)), None)
        if not key:
            if self._api_key is not None:
                problem = "the api_key given to gemini() is empty"
            else:
                where = " or ".join(self._key_env_names())
                problem = f"no API key for gemini: pass api_key= or set {where}"
            raise AuthenticationError(problem, provider=PROVIDER, status=None)
        return {"x-goog-api-key": key}

    def _path(self, method: str) -> str:
        return f"{MODELS_PATH}/{self.model}:{method}"

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        body = request_body(request, budgets=self._budgets)
        decoder = GeminiStreamDecoder()
        opened: list[str | None] = [None]
        events = self._transport.stream_sse(
            self._path("streamGenerateContent"),
            body,
            params={"alt": "sse"},
            on_open=lambda request_id: opened.__setitem__(0, request_id),
        )
        try:
            with _wrong_key_as_auth_error():
                async for event in events:
                    for chunk in self._event_chunks(event.data, decoder, opened[0]):
                        yield chunk
                try:
                    yield decoder.finish()
                except NetworkError as exc:
                    exc.request_id = opened[0]
                    raise
        finally:
            if isinstance(events, AsyncGenerator):
                await events.aclose()

    def _event_chunks(
        self, data: str, decoder: GeminiStreamDecoder, request_id: str | None
    ) -> list[StreamChunk]:
        if not data.strip():
            return []
        try:
            parsed = json.loads(data)
        except ValueError as exc:
            raise NetworkError(
                f"gemini sent a stream event that is not JSON: {data[:200]!r}",
                provider=PROVIDER,
                request_id=request_id,
            ) from exc
        error = error_body(parsed)
        if error is not None:
            failure = self._transport.stream_error(error)
            failure.request_id = failure.request_id or request_id
            raise failure
        if isinstance(parsed, list):
            parsed = parsed[0] if parsed else {}
        return decoder.feed(parsed) if isinstance(parsed, Mapping) else []

    async def _generate(self, request: ChatRequest) -> ChatResponse:
        body = request_body(request, budgets=self._budgets)
        with _wrong_key_as_auth_error():
            data, request_id = await self._transport.post_json(self._path("generateContent"), body)
        builder = ChatResponseBuilder(model=self.model, provider=PROVIDER)
        builder.request_id = request_id
        decoder = GeminiStreamDecoder()
        for chunk in decoder.feed(data if isinstance(data, Mapping) else {}):
            builder.add(chunk)
        try:
            builder.add(decoder.finish())
        except NetworkError as exc:
            exc.request_id = request_id
            raise
        return builder.build()

    async def list_models(self) -> list[str]:
        """The ids of the models that support `generateContent` (without `models/`), all pages.

        Raises:
            LLMError: the call failed (mapped as for `generate`).
        """
        names: list[str] = []
        token: str | None = None
        while True:
            params = {"pageSize": "1000", **({"pageToken": token} if token else {})}
            data, _ = await self._transport.get_json(MODELS_PATH, params=params)
            for entry in data.get("models", []) if isinstance(data, Mapping) else []:
                methods = entry.get("supportedGenerationMethods")
                if methods is None or "generateContent" in methods:
                    names.append(str(entry.get("name", "")).removeprefix("models/"))
            token = data.get("nextPageToken") if isinstance(data, Mapping) else None
            if not token:
                return names

    async def aclose(self) -> None:
        """Close the pooled HTTP client of the running event loop."""
        await self._transport.aclose()


@contextlib.contextmanager
def _wrong_key_as_auth_error() -> Iterator[None]:
    """Gemini answers a wrong API key with 400 INVALID_ARGUMENT, reason API_KEY_INVALID."""
    try:
        yield
    except InvalidRequestError as exc:
        described = f"{exc.message} {json.dumps(exc.body, default=str)}".lower()
        if isinstance(exc, ContextLengthExceededError) or not (
            "api_key_invalid" in described or "api key not valid" in described
        ):
            raise
        raise AuthenticationError(
            exc.message,
            exc.retry_after,
            status=exc.status,
            provider=exc.provider,
            request_id=exc.request_id,
            body=exc.body,
        ) from exc


def gemini(
    model: str,
    api_key: str | Callable[[], str] | None = None,
    *,
    base_url: str = DEFAULT_BASE_URL,
    api_key_env: str = _DEFAULT_KEY_ENV,
    timeout: float = 60.0,
    connect_timeout: float = 10.0,
    capabilities: Iterable[Capability] | None = None,
    pricing: ModelPricing | None = None,
    thinking_budgets: ThinkingBudgets | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> GeminiModel:
    """A Gemini model (`gemini-2.5-flash`, ...) over the Generative Language API.

    `api_key`: a string, a zero-argument callable called on every request, or None to read
    `api_key_env` on every request (the default `GEMINI_API_KEY` falls back to `GOOGLE_API_KEY`).
    `base_url` is the API root (the adapter appends `/v1beta/models/...`), for proxies and test
    servers. `capabilities` defaults to all five; with `pricing`, responses carry `cost`.
    `thinking_budgets` gives the `thinkingBudget` of each reasoning level. `transport` is for
    tests only.

    Raises (on calls, not here):
        AuthenticationError: no key could be found, before any HTTP request.
    """
    return GeminiModel(
        model,
        api_key,
        base_url=base_url,
        api_key_env=api_key_env,
        timeout=timeout,
        connect_timeout=connect_timeout,
        capabilities=capabilities,
        pricing=pricing,
        thinking_budgets=thinking_budgets,
        transport=transport,
    )
