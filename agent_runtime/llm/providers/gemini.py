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
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Unpack

from agent_runtime.llm._sse import SseEventSource
from agent_runtime.llm._transport import ApiKey
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
from agent_runtime.llm.providers._http import HttpChatModel, HttpOptions
from agent_runtime.llm.types import ChatRequest, ChatResponse, StreamChunk

__all__ = ["DEFAULT_BASE_URL", "SYNTHETIC_CALL_ID_PREFIX", "GeminiModel", "gemini"]

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
MODELS_PATH = "/v1beta/models"
_FALLBACK_KEY_ENV = "GOOGLE_API_KEY"
_DEFAULT_KEY_ENV = "GEMINI_API_KEY"


class GeminiOptions(HttpOptions, total=False):
    """Keyword options of `gemini()` besides `base_url` (defaults in `GeminiModel`)."""

    api_key_env: str


class GeminiModel(HttpChatModel):
    """A Gemini model over the Generative Language API (build it with `gemini(...)`); `model`
    and `info.model` are the name without `models/`.

    Guarantees: the API key is resolved on every request (a callable is called each time, env
    vars re-read); `stream` yields exactly one `FinishDelta`, and only after Gemini's terminal
    `finishReason`; cancelling or aborting closes the HTTP response at once.
    """

    def __init__(
        self,
        model: str,
        api_key: ApiKey = None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key_env: str = _DEFAULT_KEY_ENV,
        **options: Unpack[HttpOptions],
    ) -> None:
        self.model = model.removeprefix("models/")
        envs = [api_key_env]
        if api_key_env == _DEFAULT_KEY_ENV:
            envs.append(_FALLBACK_KEY_ENV)
        super().__init__(
            self.model,
            provider=PROVIDER,
            base_url=base_url,
            api_key=api_key,
            api_key_envs=envs,
            **options,
        )

    def _headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self._api_key_now() or ""}  # never empty: a missing key raises

    def _path(self, method: str) -> str:
        return f"{MODELS_PATH}/{self.model}:{method}"

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        body = request_body(request, budgets=self.thinking_budgets)
        decoder = GeminiStreamDecoder()
        events = SseEventSource(
            self._transport, self._path("streamGenerateContent"), body, params={"alt": "sse"}
        )
        with _wrong_key_as_auth_error():
            async with events:
                async for event in events:
                    parsed = events.json(event)
                    error = error_body(parsed)
                    if error is not None:
                        raise events.error(error)
                    if isinstance(parsed, list):
                        parsed = parsed[0] if parsed else {}
                    for chunk in decoder.feed(parsed) if isinstance(parsed, Mapping) else []:
                        yield chunk
            try:
                yield decoder.finish()
            except NetworkError as exc:
                exc.request_id = events.request_id
                raise

    async def _generate(self, request: ChatRequest) -> ChatResponse:
        body = request_body(request, budgets=self.thinking_budgets)
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
    api_key: ApiKey = None,
    *,
    base_url: str = DEFAULT_BASE_URL,
    **options: Unpack[GeminiOptions],
) -> GeminiModel:
    """A Gemini model (`gemini-2.5-flash`, ...) over the Generative Language API.

    `api_key`: a string, a zero-argument callable called on every request, or None to read
    `api_key_env` on every request (the default `GEMINI_API_KEY` falls back to `GOOGLE_API_KEY`).
    `base_url` is the API root (the adapter appends `/v1beta/models/...`), for proxies and test
    servers. `capabilities` defaults to all five; with `pricing`, responses carry `cost`.
    `thinking_budgets` gives the `thinkingBudget` of each reasoning level. `transport` is for
    tests only; `timeout`, `connect_timeout`, `request_timeout` and `idle_timeout` are as for
    every HTTP adapter (`HttpChatModel`).

    Raises (on calls, not here):
        AuthenticationError: no key could be found, before any HTTP request.
    """
    return GeminiModel(model, api_key, base_url=base_url, **options)
