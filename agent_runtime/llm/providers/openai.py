"""The OpenAI Chat Completions adapter, for OpenAI and every server that speaks its wire format.

`openai_compatible(base_url, model)` talks to any `/chat/completions` server; `openai`, `ollama`,
`llama_cpp`, `groq`, `together`, `mistral`, `deepseek` and `openrouter` are the same adapter with
a host's base URL and key variable filled in. The wire conversions are pure functions in
`agent_runtime.llm.providers._openai_convert`.

Stream policy (servers differ): `data: [DONE]` is the terminal marker; a stream that closes
cleanly after a `finish_reason` but without `[DONE]` (llama.cpp before PR #9459, ik_llama.cpp,
llama-box) is finished too, as the official SDK treats it; a stream that closes with neither
raises `NetworkError`.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from typing import Any, TypedDict, cast

import httpx
from httpx_sse import ServerSentEvent
from typing_extensions import Unpack

from agent_runtime.config import ThinkingBudgets
from agent_runtime.llm._transport import ApiKey, Transport, resolve_api_key
from agent_runtime.llm.base import BaseChatModel
from agent_runtime.llm.errors import AuthenticationError, LLMError, NetworkError, ProviderError
from agent_runtime.llm.providers._openai_convert import (
    MaxTokensParam,
    StructuredOutputMode,
    chunk_deltas,
    is_error,
    request_body,
    response_from_wire,
    stop_reason_of,
)
from agent_runtime.llm.types import (
    ALL_CAPABILITIES,
    Capability,
    ChatRequest,
    ChatResponse,
    FinishDelta,
    ModelInfo,
    ModelPricing,
    StreamChunk,
)

__all__ = [
    "HostOptions",
    "MaxTokensParam",
    "ModelOptions",
    "OpenAICompatibleModel",
    "StructuredOutputMode",
    "deepseek",
    "groq",
    "llama_cpp",
    "mistral",
    "ollama",
    "openai",
    "openai_compatible",
    "openrouter",
    "together",
]


class OpenAICompatibleModel(BaseChatModel):
    """A ChatModel over the Chat Completions API (`POST {base_url}/chat/completions`).

    Guarantees:
    - The API key is resolved on every request: a string as is, a callable called each time,
      None read from `api_key_env` each time; with `api_key_env=None` and no key, no
      `Authorization` header is sent (keyless local servers).
    - `stream` yields exactly one `FinishDelta`, when `data: [DONE]` arrives, or when the
      server closes the stream after a `finish_reason` without `[DONE]`. `[DONE]` without a
      `finish_reason` finishes as `stop`.
    - Cancelling the consuming task or aborting its signal closes the HTTP response at once.

    Raises (from `generate`, `stream`, `list_models`):
        AuthenticationError: no key (before any HTTP call; names the env var) or HTTP 401.
        LLMError: an error status or an error event inside a 200 stream, mapped by
            `agent_runtime.llm._error_map` (the request id is kept).
        NetworkError: the connection failed, or the stream ended with neither `[DONE]` nor
            a `finish_reason`.
        ProviderError: an event that is not JSON, or a body without choices.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: ApiKey = None,
        provider: str = "openai_compatible",
        api_key_env: str | None = "OPENAI_API_KEY",
        headers: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        capabilities: Iterable[Capability] | None = None,
        pricing: ModelPricing | None = None,
        thinking_budgets: ThinkingBudgets | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        max_tokens_param: MaxTokensParam = "max_tokens",
        structured_output_mode: StructuredOutputMode = "json_schema",
    ) -> None:
        self._model = model
        self._api_key = api_key
        self._api_key_env = api_key_env
        self._extra_headers = dict(headers or {})
        self._max_tokens_param: MaxTokensParam = max_tokens_param
        self._structured_output_mode: StructuredOutputMode = structured_output_mode
        # Chat Completions takes an effort level, not a token budget: kept for a uniform
        # factory signature, not sent.
        self._thinking_budgets = thinking_budgets or ThinkingBudgets()
        self._info = ModelInfo(
            provider=provider,
            model=model,
            capabilities=frozenset(ALL_CAPABILITIES if capabilities is None else capabilities),
            pricing=pricing,
        )
        self._transport = Transport(
            base_url=base_url,
            provider=provider,
            headers=self._headers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            transport=transport,
        )

    @property
    def info(self) -> ModelInfo:
        """Provider, model name, capabilities (all five unless told) and pricing."""
        return self._info

    @property
    def base_url(self) -> str:
        """The API root requests go to (`.../v1`)."""
        return self._transport.base_url

    def _headers(self) -> dict[str, str]:
        key = resolve_api_key(self._api_key)
        if self._api_key is None and self._api_key_env is not None:
            key = os.environ.get(self._api_key_env)
        headers: dict[str, str] = {}
        if key:
            headers["authorization"] = f"Bearer {key}"
        elif self._api_key is not None:
            raise AuthenticationError(
                f"no API key for {self._info.provider}: the api_key given resolved to an "
                "empty value",
                provider=self._info.provider,
            )
        elif self._api_key_env is not None:
            raise AuthenticationError(
                f"no API key for {self._info.provider}: set {self._api_key_env} or pass "
                "api_key= (for a keyless server: openai_compatible(..., api_key_env=None))",
                provider=self._info.provider,
            )
        headers.update(self._extra_headers)
        return headers

    def _body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        return request_body(
            request,
            model=self._model,
            stream=stream,
            max_tokens_param=self._max_tokens_param,
            structured_output_mode=self._structured_output_mode,
        )

    def _in_stream_error(self, payload: Any, request_id: str | None) -> LLMError:
        error = self._transport.stream_error(payload)
        error.request_id = error.request_id or request_id
        return error

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        request_id: str | None = None

        def opened(rid: str | None) -> None:
            nonlocal request_id
            request_id = rid

        finish: str | None = None
        done = False
        events = cast(
            "AsyncGenerator[ServerSentEvent, None]",
            self._transport.stream_sse(
                "/chat/completions", self._body(request, stream=True), on_open=opened
            ),
        )
        async with contextlib.aclosing(events):  # the response is closed before FinishDelta
            async for event in events:
                data = event.data.strip()
                if data.startswith("[DONE]"):
                    done = True
                    break
                if not data:
                    continue
                payload = self._decode(data, event.event, request_id)
                if event.event == "error" or is_error(payload):
                    raise self._in_stream_error(payload, request_id)
                if not isinstance(payload, Mapping):
                    continue
                chunks, reason = chunk_deltas(payload)
                for chunk in chunks:
                    yield chunk
                finish = reason or finish
        if not done and finish is None:
            raise NetworkError(
                f"the {self._info.provider} stream ended with neither [DONE] nor a "
                "finish_reason (connection cut mid-answer)",
                provider=self._info.provider,
                request_id=request_id,
            )
        yield FinishDelta(reason=stop_reason_of(finish), raw_reason=finish)

    def _decode(self, data: str, event: str | None, request_id: str | None) -> Any:
        try:
            return json.loads(data)
        except ValueError:
            if event == "error":
                raise self._in_stream_error(data, request_id) from None
            raise ProviderError(
                f"{self._info.provider} sent a stream event that is not JSON: {data[:200]!r}",
                provider=self._info.provider,
                request_id=request_id,
            ) from None

    async def _generate(self, request: ChatRequest) -> ChatResponse:
        body, request_id = await self._transport.post_json(
            "/chat/completions", self._body(request, stream=False)
        )
        if is_error(body):
            raise self._in_stream_error(body, request_id)
        if not isinstance(body, Mapping):
            raise ProviderError(
                f"{self._info.provider} answered with a body that is not an object",
                provider=self._info.provider,
                request_id=request_id,
                body=body,
            )
        return response_from_wire(
            body, model=self._model, provider=self._info.provider, request_id=request_id
        )

    async def list_models(self) -> list[str]:
        """The model ids the server offers (`GET {base_url}/models`).

        Raises:
            LLMError: as for `generate`.
        """
        body, _ = await self._transport.get_json("/models")
        entries = body.get("data", []) if isinstance(body, Mapping) else body
        return [
            str(entry["id"])
            for entry in (entries if isinstance(entries, list) else [])
            if isinstance(entry, Mapping) and "id" in entry
        ]

    async def aclose(self) -> None:
        """Close the pooled HTTP client of the running event loop (a later call opens a new one)."""
        await self._transport.aclose()


class ModelOptions(TypedDict, total=False):
    """Keyword options every factory of this module accepts."""

    headers: Mapping[str, str] | None
    timeout: float
    connect_timeout: float
    capabilities: Iterable[Capability] | None
    pricing: ModelPricing | None
    thinking_budgets: ThinkingBudgets | None
    transport: httpx.AsyncBaseTransport | None
    max_tokens_param: MaxTokensParam
    structured_output_mode: StructuredOutputMode


class HostOptions(ModelOptions, total=False):
    """`ModelOptions` plus `base_url`, to point a named host's factory at a proxy."""

    base_url: str


def openai_compatible(
    base_url: str,
    model: str,
    api_key: ApiKey = None,
    *,
    provider: str = "openai_compatible",
    api_key_env: str | None = None,
    **options: Unpack[ModelOptions],
) -> OpenAICompatibleModel:
    """A model on any Chat Completions server at `base_url` (the root ending in `/v1`).

    `api_key`: a string, a zero-argument callable (called per request) or None (read
    `api_key_env` per request; the default `api_key_env=None` sends no key, so an OpenAI
    key in the environment never goes to a third-party host by accident). Sends `max_tokens` unless
    `max_tokens_param="max_completion_tokens"`.
    """
    return OpenAICompatibleModel(
        model,
        base_url=base_url,
        api_key=api_key,
        provider=provider,
        api_key_env=api_key_env,
        **options,
    )


def _host(
    model: str,
    api_key: ApiKey,
    options: HostOptions,
    *,
    base_url: str,
    provider: str,
    api_key_env: str | None,
    **defaults: Any,
) -> OpenAICompatibleModel:
    settings: dict[str, Any] = {**defaults, **options}
    settings.setdefault("base_url", base_url)
    return OpenAICompatibleModel(
        model, api_key=api_key, provider=provider, api_key_env=api_key_env, **settings
    )


def openai(
    model: str, api_key: ApiKey = None, **options: Unpack[HostOptions]
) -> OpenAICompatibleModel:
    """OpenAI's own API (`OPENAI_API_KEY`); sends `max_completion_tokens`."""
    return _host(
        model,
        api_key,
        options,
        base_url="https://api.openai.com/v1",
        provider="openai",
        api_key_env="OPENAI_API_KEY",
        max_tokens_param="max_completion_tokens",
    )


def ollama(
    model: str,
    base_url: str = "http://127.0.0.1:11434/v1",
    *,
    api_key: ApiKey = None,
    **options: Unpack[ModelOptions],
) -> OpenAICompatibleModel:
    """A local Ollama server; no key needed (one given is sent, e.g. for a proxy)."""
    return OpenAICompatibleModel(
        model, base_url=base_url, api_key=api_key, provider="ollama", api_key_env=None, **options
    )


def llama_cpp(
    model: str = "local",
    base_url: str = "http://127.0.0.1:8080/v1",
    *,
    api_key: ApiKey = None,
    **options: Unpack[ModelOptions],
) -> OpenAICompatibleModel:
    """A local llama.cpp `llama-server`; no key needed (one given is sent, for `--api-key`)."""
    return OpenAICompatibleModel(
        model,
        base_url=base_url,
        api_key=api_key,
        provider="llama_cpp",
        api_key_env=None,
        **options,
    )


def groq(
    model: str, api_key: ApiKey = None, **options: Unpack[HostOptions]
) -> OpenAICompatibleModel:
    """Groq (`GROQ_API_KEY`)."""
    return _host(
        model,
        api_key,
        options,
        base_url="https://api.groq.com/openai/v1",
        provider="groq",
        api_key_env="GROQ_API_KEY",
    )


def together(
    model: str, api_key: ApiKey = None, **options: Unpack[HostOptions]
) -> OpenAICompatibleModel:
    """Together AI (`TOGETHER_API_KEY`)."""
    return _host(
        model,
        api_key,
        options,
        base_url="https://api.together.xyz/v1",
        provider="together",
        api_key_env="TOGETHER_API_KEY",
    )


def mistral(
    model: str, api_key: ApiKey = None, **options: Unpack[HostOptions]
) -> OpenAICompatibleModel:
    """Mistral La Plateforme (`MISTRAL_API_KEY`)."""
    return _host(
        model,
        api_key,
        options,
        base_url="https://api.mistral.ai/v1",
        provider="mistral",
        api_key_env="MISTRAL_API_KEY",
    )


def deepseek(
    model: str, api_key: ApiKey = None, **options: Unpack[HostOptions]
) -> OpenAICompatibleModel:
    """DeepSeek (`DEEPSEEK_API_KEY`); structured output uses JSON mode (DeepSeek has no
    `json_schema` response format), with the schema in the system message."""
    return _host(
        model,
        api_key,
        options,
        base_url="https://api.deepseek.com/v1",
        provider="deepseek",
        api_key_env="DEEPSEEK_API_KEY",
        structured_output_mode="json_object",
    )


def openrouter(
    model: str, api_key: ApiKey = None, **options: Unpack[HostOptions]
) -> OpenAICompatibleModel:
    """OpenRouter (`OPENROUTER_API_KEY`)."""
    return _host(
        model,
        api_key,
        options,
        base_url="https://openrouter.ai/api/v1",
        provider="openrouter",
        api_key_env="OPENROUTER_API_KEY",
    )
