"""Embeddings over the OpenAI wire (`POST {base_url}/embeddings`): OpenAI and every server that
speaks it (llama.cpp, Ollama, vLLM, Together, Mistral, ...)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Unpack

from agent_runtime.llm._embeddings import EmbeddingTask, vectors_of
from agent_runtime.llm._transport import ApiKey
from agent_runtime.llm.errors import ProviderError
from agent_runtime.llm.providers._http_embeddings import EmbeddingHttpOptions, HttpEmbeddingModel
from agent_runtime.llm.providers._openai_convert import is_error

__all__ = ["OpenAICompatibleEmbeddings", "openai_compatible_embeddings"]

OPENAI_MAX_INPUTS = 2048
"""OpenAI's limit of inputs per embeddings request: larger calls are split."""


class OpenAICompatibleEmbeddings(HttpEmbeddingModel):
    """An `EmbeddingModel` over `POST {base_url}/embeddings` (build it with
    `openai_compatible_embeddings`).

    Guarantees:
    - The OpenAI wire has no task type: `task` changes the request only through
      `query_prefix` / `document_prefix` (prepended to each text, for models trained with
      them, such as `"search_query: "` of nomic-embed or `"query: "` of e5); with neither,
      `task` is accepted and sent nowhere.
    - Vectors come back in the order of the texts (the answer's `index` is followed).
    - A server that answers one vector per token (llama.cpp with a model without a pooling
      type) gets its token vectors averaged into one vector per text, unless
      `mean_pool_tokens=False`, which makes that a `ProviderError`.
    - Errors: the chat adapters' mapping (`AuthenticationError` on 401 or a missing key,
      `RateLimitError`, `InvalidRequestError`, `ModelNotFoundError` naming the URL, ...).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: ApiKey = None,
        provider: str = "openai_compatible",
        api_key_env: str | None = None,
        headers: Mapping[str, str] | None = None,
        dimensions: int | None = None,
        query_prefix: str = "",
        document_prefix: str = "",
        mean_pool_tokens: bool = True,
        **options: Unpack[EmbeddingHttpOptions],
    ) -> None:
        if dimensions is not None and (
            isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1
        ):
            raise ValueError(f"invalid dimensions {dimensions!r} (expected an int >= 1 or None)")
        super().__init__(
            model,
            provider=provider,
            base_url=base_url,
            api_key=api_key,
            api_key_envs=() if api_key_env is None else (api_key_env,),
            default_batch_size=OPENAI_MAX_INPUTS,
            **options,
        )
        self._extra_headers = dict(headers or {})
        self._dimensions = dimensions
        self._prefixes: dict[EmbeddingTask, str] = {
            "query": query_prefix,
            "document": document_prefix,
        }
        self._mean_pool_tokens = mean_pool_tokens

    def _headers(self) -> dict[str, str]:
        key = self._api_key_now(" (or api_key_env=...)")
        headers = {"authorization": f"Bearer {key}"} if key else {}
        headers.update(self._extra_headers)
        return headers

    async def _embed_batch(self, texts: list[str], task: EmbeddingTask | None) -> list[list[float]]:
        prefix = self._prefixes[task] if task is not None else ""
        body: dict[str, Any] = {
            "model": self._info.model,
            "input": [prefix + text for text in texts],
            "encoding_format": "float",
        }
        if self._dimensions is not None:
            body["dimensions"] = self._dimensions
        data, request_id = await self._transport.post_json("/embeddings", body)
        provider = self._info.provider
        if is_error(data):
            raise self._transport.stream_error(data, request_id)
        entries = data.get("data") if isinstance(data, Mapping) else None
        if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
            raise ProviderError(
                f"{provider} answered an embedding request without a `data` list of objects",
                provider=provider,
                request_id=request_id,
                body=data,
                retryable=False,
            )
        ordered = sorted(
            enumerate(entries),
            key=lambda pair: pair[1]["index"] if isinstance(pair[1].get("index"), int) else pair[0],
        )
        try:
            return vectors_of(
                [entry.get("embedding") for _, entry in ordered],
                expected=len(texts),
                provider=provider,
                mean_pool_tokens=self._mean_pool_tokens,
            )
        except ProviderError as error:
            error.request_id = request_id
            raise


def openai_compatible_embeddings(
    base_url: str,
    model: str,
    api_key: ApiKey = None,
    *,
    provider: str = "openai_compatible",
    api_key_env: str | None = None,
    headers: Mapping[str, str] | None = None,
    dimensions: int | None = None,
    query_prefix: str = "",
    document_prefix: str = "",
    mean_pool_tokens: bool = True,
    **options: Unpack[EmbeddingHttpOptions],
) -> OpenAICompatibleEmbeddings:
    """An embedding model on any OpenAI-style `/embeddings` server at `base_url` (the root
    ending in `/v1`).

    `api_key`: a string, a zero-argument callable (called per request) or None (read
    `api_key_env` per request; the default None sends no key). `dimensions` asks for shorter
    vectors (models that support it). `max_batch_size` (default 2048, OpenAI's limit) caps
    the texts per request. See `OpenAICompatibleEmbeddings` for `task` and the prefixes.
    """
    return OpenAICompatibleEmbeddings(
        model,
        base_url=base_url,
        api_key=api_key,
        provider=provider,
        api_key_env=api_key_env,
        headers=headers,
        dimensions=dimensions,
        query_prefix=query_prefix,
        document_prefix=document_prefix,
        mean_pool_tokens=mean_pool_tokens,
        **options,
    )
