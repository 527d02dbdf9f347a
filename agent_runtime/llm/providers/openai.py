"""The OpenAI Chat Completions adapter, for OpenAI and every server that speaks its wire format.

`openai_compatible(base_url, model)` talks to any `/chat/completions` server; `openai`, `ollama`,
`llama_cpp`, `groq`, `together`, `mistral`, `deepseek` and `openrouter` are the same adapter with
a host's base URL and key variable filled in. The wire conversions are pure functions in
`agent_runtime.llm.providers._openai_convert`.

Stream policy (servers differ): `data: [DONE]` is the terminal marker; a stream that closes
cleanly after a `finish_reason` but without `[DONE]` (llama.cpp before PR #9459, ik_llama.cpp,
llama-box) is finished too, as the official SDK treats it; a stream that closes with neither
raises `NetworkError`; a 200 stream with no event at all is repeated once without streaming
(llama-cpp-python's way of failing after its headers: the repeat gets the real error; when it
answers a request with tools, that shape of request goes without streaming from then on). A stream
without a usage chunk gets an estimate (`Usage.estimated`), as does a body without `usage`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Unpack

from agent_runtime.llm._sse import SseEventSource
from agent_runtime.llm._transport import ApiKey, encode_json
from agent_runtime.llm._usage import answer_chars, estimated_usage
from agent_runtime.llm.builder import ChatResponseBuilder
from agent_runtime.llm.errors import LLMError, NetworkError, ProviderError
from agent_runtime.llm.providers._http import HttpChatModel, HttpOptions
from agent_runtime.llm.providers._openai_convert import (
    MaxTokensParam,
    StructuredOutputMode,
    chunk_deltas,
    completion_chunks,
    is_error,
    request_body,
    stop_reason_of,
)
from agent_runtime.llm.providers._openai_quirks import explain_unexplained_failure
from agent_runtime.llm.providers._stream_fallback import Shape, StreamFallbacks, shape_of
from agent_runtime.llm.types import (
    ChatRequest,
    ChatResponse,
    FinishDelta,
    StreamChunk,
    UsageDelta,
)
from supervisors._log import get_logger

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

log = get_logger(__name__)


class OpenAICompatibleModel(HttpChatModel):
    """A ChatModel over the Chat Completions API (`POST {base_url}/chat/completions`).

    Guarantees:
    - The API key is resolved on every request: a string as is, a callable called each time,
      None read from `api_key_env` each time; with `api_key_env=None` and no key, no
      `Authorization` header is sent (keyless local servers).
    - `stream` yields exactly one `FinishDelta`, when `data: [DONE]` arrives, or when the
      server closes the stream after a `finish_reason` without `[DONE]`. `[DONE]` without a
      `finish_reason` finishes as `stop`. Just before it comes a `UsageDelta`: the
      provider's, else an estimate marked `Usage.estimated`.
    - A 200 stream that carries no event is made once more without streaming: its error is
      raised (typed: `ContextLengthExceededError`, `InvalidRequestError`, ...), its answer is
      streamed; when that has no answer either, a non-retryable `ProviderError`
      (`code="empty_stream"`) is raised, never a retryable `NetworkError`.
    - When that repeat answers a request with tools, the instance remembers the request's
      shape (its `tool_choice`, and whether it follows a tool result) for its life: later
      streamed requests of that shape are sent without streaming at once, one request
      instead of two (logged at debug level, counted by `agent_runtime.llm.stream_fallbacks`).
    - Cancelling the consuming task or aborting its signal closes the HTTP response at once.

    Raises (from `generate`, `stream`, `list_models`):
        AuthenticationError: no key (before any HTTP call; names the env var) or HTTP 401.
        LLMError: an error status or an error event inside a 200 stream, mapped by
            `agent_runtime.llm._error_map` (the request id is kept).
        NetworkError: the connection failed, an event is not JSON, or the stream ended with
            neither `[DONE]` nor a `finish_reason`.
        ProviderError: a body that is not an object; an empty stream whose repeat had no
            answer (not retryable).
        ModelNotFoundError: HTTP 404; the message names the URL called (a `base_url`
            without `/v1` is the usual cause).
    """

    _missing_key_hint = " (for a keyless server: openai_compatible(..., api_key_env=None))"

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: ApiKey = None,
        provider: str = "openai_compatible",
        api_key_env: str | None = "OPENAI_API_KEY",
        headers: Mapping[str, str] | None = None,
        max_tokens_param: MaxTokensParam = "max_tokens",
        structured_output_mode: StructuredOutputMode = "json_schema",
        **options: Unpack[HttpOptions],
    ) -> None:
        # Chat Completions takes an effort level, not a token budget: `thinking_budgets` is
        # kept for a uniform factory signature, not sent.
        super().__init__(
            model,
            provider=provider,
            base_url=base_url,
            api_key=api_key,
            api_key_envs=() if api_key_env is None else (api_key_env,),
            **options,
        )
        self._extra_headers = dict(headers or {})
        self._max_tokens_param: MaxTokensParam = max_tokens_param
        self._structured_output_mode: StructuredOutputMode = structured_output_mode
        self._stream_fallbacks = StreamFallbacks(provider, model)

    def _headers(self) -> dict[str, str]:
        key = self._api_key_now()
        headers = {"authorization": f"Bearer {key}"} if key else {}
        headers.update(self._extra_headers)
        return headers

    def _body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        return request_body(
            request,
            model=self._info.model,
            stream=stream,
            max_tokens_param=self._max_tokens_param,
            structured_output_mode=self._structured_output_mode,
        )

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        finish: str | None = None
        done = received = reported_usage = False
        output_chars = 0
        wire = self._body(request, stream=True)
        shape = shape_of(request, wire)
        if self._stream_fallbacks.learned(shape):  # this server cannot stream this shape
            chunks, _ = await self._completion_chunks(request)
            for chunk in chunks:
                yield chunk
            return
        events = SseEventSource(self._transport, "/chat/completions", wire)
        try:
            async with events:  # the response is closed before FinishDelta
                async for event in events:
                    received = True
                    if event.data.strip().startswith("[DONE]"):
                        done = True
                        break
                    payload = events.json(event)
                    if event.event == "error" or is_error(payload):
                        raise events.error(payload)
                    if not isinstance(payload, Mapping):
                        continue
                    chunks, reason = chunk_deltas(payload)
                    for chunk in chunks:
                        if isinstance(chunk, UsageDelta):
                            reported_usage = True
                        else:
                            output_chars += answer_chars(chunk)
                        yield chunk
                    finish = reason or finish
        except LLMError as error:
            self._explain(error, wire)
            raise
        if not received:
            async for chunk in self._after_empty_stream(request, events.request_id, shape):
                yield chunk
            return
        if not done and finish is None:
            raise NetworkError(
                f"the {self._info.provider} stream ended with neither [DONE] nor a "
                "finish_reason (connection cut mid-answer)",
                provider=self._info.provider,
                request_id=events.request_id,
            )
        if not reported_usage:  # llama-cpp-python ignores stream_options.include_usage
            yield UsageDelta(usage=estimated_usage(events.request_bytes, output_chars))
        yield FinishDelta(reason=stop_reason_of(finish), raw_reason=finish)

    async def _after_empty_stream(
        self, request: ChatRequest, request_id: str | None, shape: Shape | None
    ) -> AsyncIterator[StreamChunk]:
        """A 200 stream that carried no event at all is how llama-cpp-python reports an
        error it meets after sending its headers (a prompt past the context window, a
        `tool_choice` it cannot serve). The same request is made once without streaming,
        where the server answers with the real error, which is raised (a `ProviderError`
        marked not retryable: the server fails this request either way); should it answer,
        its answer is the stream's, and requests of the same `shape` (with tools) go
        without streaming from then on (`_stream_fallback`). Nothing else retries it."""
        log.warning("llm.stream.empty", provider=self._info.provider, request_id=request_id)
        try:
            # A new connection: the server closes the one that carried the empty stream.
            chunks, _ = await self._completion_chunks(request, fresh_connection=True)
        except ProviderError as error:
            # The server fails this request in both modes: retrying it blindly cannot help.
            error.retryable = False
            raise
        if not chunks[:-2]:  # nothing but usage and finish
            raise ProviderError(
                f"{self._info.provider} answered a streamed request with an empty event stream "
                "(HTTP 200, no event) and the same request without streaming with no answer",
                provider=self._info.provider,
                request_id=request_id,
                retryable=False,
                code="empty_stream",
            )
        self._stream_fallbacks.learn(shape)
        for chunk in chunks:
            yield chunk

    async def _completion_chunks(
        self, request: ChatRequest, *, fresh_connection: bool = False
    ) -> tuple[list[StreamChunk], str | None]:
        """A non-streamed call as chunks (usage estimated when the body has none), and its
        request id."""
        wire = self._body(request, stream=False)
        try:
            body, request_id = await self._transport.post_json(
                "/chat/completions", wire, fresh_connection=fresh_connection
            )
        except LLMError as error:
            self._explain(error, wire)
            raise
        provider = self._info.provider
        if is_error(body):
            raise self._transport.stream_error(body, request_id)
        if not isinstance(body, Mapping):
            raise ProviderError(
                f"{provider} answered with a body that is not an object",
                provider=provider,
                request_id=request_id,
                body=body,
            )
        chunks = completion_chunks(body, provider=provider, request_id=request_id)
        if not isinstance(chunks[-2] if len(chunks) > 1 else None, UsageDelta):
            output_chars = sum(answer_chars(chunk) for chunk in chunks)
            usage = estimated_usage(len(encode_json(wire)), output_chars)
            chunks.insert(len(chunks) - 1, UsageDelta(usage=usage))
        return chunks, request_id

    def _explain(self, error: LLMError, wire: Mapping[str, Any]) -> None:
        """Name the options of `wire` that local servers are known to reject, when `error` is
        a failure the server gave no reason for (not for the hosted APIs, which do not)."""
        if self._info.provider not in _HOSTS:
            explain_unexplained_failure(error, wire)

    async def _generate(self, request: ChatRequest) -> ChatResponse:
        chunks, request_id = await self._completion_chunks(request)
        builder = ChatResponseBuilder(model=self._info.model, provider=self._info.provider)
        builder.request_id = request_id
        for chunk in chunks:
            builder.add(chunk)
        return builder.build()

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


class ModelOptions(HttpOptions, total=False):
    """Keyword options every factory of this module accepts."""

    headers: Mapping[str, str] | None
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


# provider: (base_url, api_key_env, option defaults) of each named host
_HOSTS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "openai": (
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
        {"max_tokens_param": "max_completion_tokens"},
    ),
    "groq": ("https://api.groq.com/openai/v1", "GROQ_API_KEY", {}),
    "together": ("https://api.together.xyz/v1", "TOGETHER_API_KEY", {}),
    "mistral": ("https://api.mistral.ai/v1", "MISTRAL_API_KEY", {}),
    "deepseek": (
        "https://api.deepseek.com/v1",
        "DEEPSEEK_API_KEY",
        {"structured_output_mode": "json_object"},
    ),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", {}),
}


def _host(
    provider: str, model: str, api_key: ApiKey, options: HostOptions
) -> OpenAICompatibleModel:
    base_url, api_key_env, defaults = _HOSTS[provider]
    settings: dict[str, Any] = {"base_url": base_url, **defaults, **options}
    return OpenAICompatibleModel(
        model, api_key=api_key, provider=provider, api_key_env=api_key_env, **settings
    )


def openai(
    model: str, api_key: ApiKey = None, **options: Unpack[HostOptions]
) -> OpenAICompatibleModel:
    """OpenAI's own API (`OPENAI_API_KEY`); sends `max_completion_tokens`."""
    return _host("openai", model, api_key, options)


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
    return _host("groq", model, api_key, options)


def together(
    model: str, api_key: ApiKey = None, **options: Unpack[HostOptions]
) -> OpenAICompatibleModel:
    """Together AI (`TOGETHER_API_KEY`)."""
    return _host("together", model, api_key, options)


def mistral(
    model: str, api_key: ApiKey = None, **options: Unpack[HostOptions]
) -> OpenAICompatibleModel:
    """Mistral La Plateforme (`MISTRAL_API_KEY`)."""
    return _host("mistral", model, api_key, options)


def deepseek(
    model: str, api_key: ApiKey = None, **options: Unpack[HostOptions]
) -> OpenAICompatibleModel:
    """DeepSeek (`DEEPSEEK_API_KEY`); structured output uses JSON mode (DeepSeek has no
    `json_schema` response format), with the schema in the system message."""
    return _host("deepseek", model, api_key, options)


def openrouter(
    model: str, api_key: ApiKey = None, **options: Unpack[HostOptions]
) -> OpenAICompatibleModel:
    """OpenRouter (`OPENROUTER_API_KEY`)."""
    return _host("openrouter", model, api_key, options)
