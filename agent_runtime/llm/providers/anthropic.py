"""The Anthropic Messages API adapter: `anthropic(model, api_key)` over the shared httpx transport.

`generate` makes a non-streamed `POST /v1/messages`, `stream` reads its SSE stream; both go
through the pure conversions of `_anthropic_convert` (beside this module), whose docstring says
how our transcript, reasoning levels, JSON mode, stop reasons and usage map onto the API.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Unpack

import httpx_sse

from agent_runtime.llm._sse import SseEventSource
from agent_runtime.llm._transport import ApiKey
from agent_runtime.llm.builder import ChatResponseBuilder
from agent_runtime.llm.errors import NetworkError
from agent_runtime.llm.providers._anthropic_convert import (
    PROVIDER,
    StreamDecoder,
    chunks_from_message,
    request_body,
)
from agent_runtime.llm.providers._http import HttpChatModel, HttpOptions
from agent_runtime.llm.types import ChatRequest, ChatResponse, StreamChunk

__all__ = ["AnthropicModel", "anthropic"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
MESSAGES_PATH = "/v1/messages"
MODELS_PATH = "/v1/models"


def _is_ping(event: httpx_sse.ServerSentEvent) -> bool:
    """Anthropic's keep-alive event: not data, so it does not hold off `idle_timeout`."""
    return event.event == "ping"


class AnthropicOptions(HttpOptions, total=False):
    """Keyword options of `anthropic()` besides `base_url` (defaults in `AnthropicModel`)."""

    api_key_env: str
    anthropic_version: str
    max_output_tokens: int


def anthropic(
    model: str,
    api_key: ApiKey = None,
    *,
    base_url: str = DEFAULT_BASE_URL,
    **options: Unpack[AnthropicOptions],
) -> AnthropicModel:
    """A ChatModel for Anthropic's Messages API (`POST {base_url}/v1/messages`).

    `api_key` is a string, a zero-argument callable called on every request, or None to read
    `api_key_env` (default `ANTHROPIC_API_KEY`) on every request. `base_url` is the API root,
    without `/v1`. `max_output_tokens` (default 4096) is the `max_tokens` sent when the request
    sets none (the API requires one); `anthropic_version` is the `anthropic-version` header
    (default `2023-06-01`). `capabilities` defaults to all five; with `pricing`, responses
    carry `cost`; the other options are those of every HTTP adapter (`HttpChatModel`).
    No I/O happens here; a missing key is only noticed by the first call, which then raises
    `AuthenticationError` naming `api_key_env` before any HTTP request.

    Raises:
        ValueError: `max_output_tokens` is below 1.
    """
    return AnthropicModel(model, api_key, base_url=base_url, **options)


class AnthropicModel(HttpChatModel):
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
        NetworkError: the connection failed, or an event is not JSON.
        LLMError: any other failure, mapped from the status or error event.
    """

    def __init__(
        self,
        model: str,
        api_key: ApiKey = None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key_env: str = "ANTHROPIC_API_KEY",
        anthropic_version: str = "2023-06-01",
        max_output_tokens: int = 4096,
        **options: Unpack[HttpOptions],
    ) -> None:
        if max_output_tokens < 1:
            raise ValueError(f"max_output_tokens must be at least 1, got {max_output_tokens}")
        super().__init__(
            model,
            provider=PROVIDER,
            base_url=base_url,
            api_key=api_key,
            api_key_envs=(api_key_env,),
            **options,
        )
        self._version = anthropic_version
        self.max_output_tokens = max_output_tokens

    def _headers(self) -> dict[str, str]:
        return {
            "x-api-key": self._api_key_now() or "",  # never empty: a missing key raises
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
            raise self._transport.stream_error(body, request_id)
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
        decoder = StreamDecoder()
        events = SseEventSource(
            self._transport, MESSAGES_PATH, self._body(request, stream=True), keepalive=_is_ping
        )
        async with events:
            async for event in events:
                data = events.json(event)
                if not isinstance(data, dict):
                    continue  # not an event of the Messages API; skipped like unknown events
                if event.event == "error" or data.get("type") == "error":
                    raise events.error(data)
                for chunk in decoder.feed(data):
                    yield chunk
                if decoder.finished:
                    return
        raise NetworkError(
            "the anthropic stream ended without message_stop (connection cut mid-answer)",
            provider=PROVIDER,
            request_id=events.request_id,
        )

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
