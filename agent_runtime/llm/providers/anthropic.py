"""The Anthropic Messages API adapter: `anthropic(model, api_key)` over the shared httpx transport.

`generate` makes a non-streamed `POST /v1/messages`, `stream` reads its SSE stream; both go
through the pure conversions of `_anthropic_convert` (beside this module), whose docstring says
how our transcript, reasoning levels, JSON mode, stop reasons and usage map onto the API.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from typing import Any, cast

import httpx
from httpx_sse import ServerSentEvent

from agent_runtime.config import ThinkingBudgets
from agent_runtime.llm._transport import Transport, resolve_api_key
from agent_runtime.llm.base import BaseChatModel
from agent_runtime.llm.builder import ChatResponseBuilder
from agent_runtime.llm.errors import AuthenticationError, LLMError, NetworkError
from agent_runtime.llm.providers._anthropic_convert import (
    StreamDecoder,
    chunks_from_message,
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

__all__ = ["AnthropicModel", "anthropic"]

PROVIDER = "anthropic"
MESSAGES_PATH = "/v1/messages"
MODELS_PATH = "/v1/models"


def anthropic(
    model: str,
    api_key: str | Callable[[], str] | None = None,
    *,
    base_url: str = "https://api.anthropic.com",
    api_key_env: str = "ANTHROPIC_API_KEY",
    anthropic_version: str = "2023-06-01",
    max_output_tokens: int = 4096,
    timeout: float = 60.0,
    connect_timeout: float = 10.0,
    capabilities: Iterable[Capability] | None = None,
    pricing: ModelPricing | None = None,
    thinking_budgets: ThinkingBudgets | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> AnthropicModel:
    """A ChatModel for Anthropic's Messages API (`POST {base_url}/v1/messages`).

    `api_key` is a string, a zero-argument callable called on every request, or None to read
    `api_key_env` on every request. `base_url` is the API root, without `/v1`.
    `max_output_tokens` is the `max_tokens` sent when the request sets none (the API requires
    one). `capabilities` defaults to all five; with `pricing`, responses carry `cost`.
    No I/O happens here; a missing key is only noticed by the first call, which then raises
    `AuthenticationError` naming `api_key_env` before any HTTP request.

    Raises:
        ValueError: `max_output_tokens` is below 1.
    """
    return AnthropicModel(
        model,
        api_key,
        base_url=base_url,
        api_key_env=api_key_env,
        anthropic_version=anthropic_version,
        max_output_tokens=max_output_tokens,
        timeout=timeout,
        connect_timeout=connect_timeout,
        capabilities=capabilities,
        pricing=pricing,
        thinking_budgets=thinking_budgets,
        transport=transport,
    )


class AnthropicModel(BaseChatModel):
    """Anthropic's Messages API as a ChatModel: `generate` makes a non-streamed call, `stream`
    reads the SSE stream; both assemble the same `ChatResponse` for the same answer.

    Safe to share between tasks and event loops (one pooled httpx client per loop). A stream
    yields exactly one `FinishDelta`, on the API's `message_stop`; a stream that ends without it
    raises `NetworkError`, and an `error` event inside the stream (e.g. `overloaded_error`)
    raises its mapped `LLMError` (`ProviderError` for overload) after the chunks before it.
    Errors carry the response's request id. Cancelling the consuming task or aborting its
    signal closes the HTTP response at once.

    Raises (from `generate` and while iterating `stream`):
        AuthenticationError: no API key (before any request), or the API rejected it.
        CapabilityNotSupportedError: before any request.
        LLMError: any other failure, mapped from the status or error event.
    """

    def __init__(
        self,
        model: str,
        api_key: str | Callable[[], str] | None = None,
        *,
        base_url: str = "https://api.anthropic.com",
        api_key_env: str = "ANTHROPIC_API_KEY",
        anthropic_version: str = "2023-06-01",
        max_output_tokens: int = 4096,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        capabilities: Iterable[Capability] | None = None,
        pricing: ModelPricing | None = None,
        thinking_budgets: ThinkingBudgets | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if max_output_tokens < 1:
            raise ValueError(f"max_output_tokens must be at least 1, got {max_output_tokens}")
        self._api_key = api_key
        self._api_key_env = api_key_env
        self._version = anthropic_version
        self.max_output_tokens = max_output_tokens
        self.thinking_budgets = thinking_budgets or ThinkingBudgets()
        self._info = ModelInfo(
            provider=PROVIDER,
            model=model,
            capabilities=ALL_CAPABILITIES if capabilities is None else frozenset(capabilities),
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
        """Provider `anthropic`, the model name, capabilities and pricing."""
        return self._info

    @property
    def base_url(self) -> str:
        """The API root requests go to (without the version path)."""
        return self._transport.base_url

    def _headers(self) -> dict[str, str]:
        if self._api_key is None:
            key = os.environ.get(self._api_key_env)
            where = f"set {self._api_key_env} or pass api_key="
        else:
            key = resolve_api_key(self._api_key)
            where = "the api_key given to anthropic() is empty"
        if not key:
            raise AuthenticationError(f"no Anthropic API key: {where}", provider=PROVIDER)
        return {
            "x-api-key": key,
            "anthropic-version": self._version,
            "content-type": "application/json",
        }

    def _body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        return request_body(
            request,
            model=self._info.model,
            max_output_tokens=self.max_output_tokens,
            thinking_budgets=self.thinking_budgets,
            stream=stream,
        )

    async def _generate(self, request: ChatRequest) -> ChatResponse:
        body, request_id = await self._transport.post_json(
            MESSAGES_PATH, self._body(request, stream=False)
        )
        if isinstance(body, Mapping) and body.get("type") == "error":
            raise self._stream_error(body, request_id)
        if not isinstance(body, Mapping):
            raise NetworkError(
                f"anthropic answered with a body that is not a message: {body!r:.200}",
                provider=PROVIDER,
                request_id=request_id,
            )
        builder = ChatResponseBuilder(model=self._info.model, provider=PROVIDER)
        builder.request_id = request_id
        for chunk in chunks_from_message(body):
            builder.add(chunk)
        return builder.build()

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        request_id: str | None = None

        def opened(rid: str | None) -> None:
            nonlocal request_id
            request_id = rid

        decoder = StreamDecoder()
        # stream_sse is an async generator; aclosing closes its response on every exit path
        events = cast(
            "AsyncGenerator[ServerSentEvent, None]",
            self._transport.stream_sse(
                MESSAGES_PATH, self._body(request, stream=True), on_open=opened
            ),
        )
        async with contextlib.aclosing(events):
            async for event in events:
                if not event.data.strip():
                    continue
                try:
                    data = json.loads(event.data)
                except ValueError as exc:
                    raise NetworkError(
                        f"anthropic sent a stream event that is not JSON: {event.data[:200]!r}",
                        provider=PROVIDER,
                        request_id=request_id,
                    ) from exc
                if not isinstance(data, dict):
                    continue  # not an event of the Messages API; skipped like unknown events
                if event.event == "error" or data.get("type") == "error":
                    raise self._stream_error(data, request_id)
                for chunk in decoder.feed(data):
                    yield chunk
                if decoder.finished:
                    return
        raise NetworkError(
            "the anthropic stream ended without message_stop (connection cut mid-answer)",
            provider=PROVIDER,
            request_id=request_id,
        )

    def _stream_error(self, body: Any, request_id: str | None) -> LLMError:
        error = self._transport.stream_error(body)
        error.request_id = error.request_id or request_id
        return error

    async def list_models(self) -> list[str]:
        """The ids of the models this key may use (`GET /v1/models`, every page).

        Raises:
            LLMError: the call failed (mapped as for `generate`).
        """
        models: list[str] = []
        params = {"limit": "1000"}
        while True:
            body, _ = await self._transport.get_json(MODELS_PATH, params=params)
            page = body.get("data", []) if isinstance(body, Mapping) else []
            models.extend(str(m["id"]) for m in page if isinstance(m, Mapping) and "id" in m)
            last_id = body.get("last_id") if isinstance(body, Mapping) else None
            if not (isinstance(body, Mapping) and body.get("has_more") and last_id and page):
                return models
            params = {"limit": "1000", "after_id": str(last_id)}

    async def aclose(self) -> None:
        """Close the pooled HTTP client of the running event loop (a later call reopens one)."""
        await self._transport.aclose()
