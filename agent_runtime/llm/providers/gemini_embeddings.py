"""Gemini embeddings over the Generative Language API: `:embedContent` for one text,
`:batchEmbedContents` (at most 100 texts a call, Gemini's limit) for more, task-typed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Unpack

from agent_runtime.llm._embeddings import EmbeddingTask, vectors_of
from agent_runtime.llm._transport import ApiKey
from agent_runtime.llm.errors import ProviderError
from agent_runtime.llm.providers._gemini_convert import PROVIDER, error_body
from agent_runtime.llm.providers._http_embeddings import EmbeddingHttpOptions, HttpEmbeddingModel
from agent_runtime.llm.providers.gemini import (
    _DEFAULT_KEY_ENV,
    _FALLBACK_KEY_ENV,
    DEFAULT_BASE_URL,
    MODELS_PATH,
    _wrong_key_as_auth_error,
)

__all__ = ["GEMINI_MAX_BATCH", "TASK_TYPES", "GeminiEmbeddings", "gemini_embeddings"]

GEMINI_MAX_BATCH = 100
"""Gemini's limit of requests in one `batchEmbedContents` call: larger calls are split."""
TASK_TYPES: dict[EmbeddingTask, str] = {
    "query": "RETRIEVAL_QUERY",
    "document": "RETRIEVAL_DOCUMENT",
}
"""Our `task` to Gemini's `taskType`."""


class GeminiEmbeddings(HttpEmbeddingModel):
    """An `EmbeddingModel` over Gemini (build it with `gemini_embeddings`).

    Guarantees: `task="query"` sends `taskType: RETRIEVAL_QUERY`, `"document"`
    `RETRIEVAL_DOCUMENT`, None no task type (Gemini's default); one text goes to
    `:embedContent`, more to `:batchEmbedContents`, at most `max_batch_size` (default 100)
    a request; vectors come back in the order of the texts. Errors as the chat adapter's
    (a 400 `API_KEY_INVALID` is an `AuthenticationError`).
    """

    def __init__(
        self,
        model: str = "gemini-embedding-001",
        api_key: ApiKey = None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key_env: str = _DEFAULT_KEY_ENV,
        output_dimensionality: int | None = None,
        **options: Unpack[EmbeddingHttpOptions],
    ) -> None:
        if output_dimensionality is not None and (
            isinstance(output_dimensionality, bool)
            or not isinstance(output_dimensionality, int)
            or output_dimensionality < 1
        ):
            raise ValueError(
                f"invalid output_dimensionality {output_dimensionality!r} "
                "(expected an int >= 1 or None)"
            )
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
            default_batch_size=GEMINI_MAX_BATCH,
            **options,
        )
        self._dimensionality = output_dimensionality

    def _headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self._api_key_now() or ""}  # never empty: a missing key raises

    def _request(self, text: str, task: EmbeddingTask | None) -> dict[str, Any]:
        request: dict[str, Any] = {"content": {"parts": [{"text": text}]}}
        if task is not None:
            request["taskType"] = TASK_TYPES[task]
        if self._dimensionality is not None:
            request["outputDimensionality"] = self._dimensionality
        return request

    async def _embed_batch(self, texts: list[str], task: EmbeddingTask | None) -> list[list[float]]:
        path = f"{MODELS_PATH}/{self.model}"
        single = len(texts) == 1
        if single:
            body = self._request(texts[0], task)
        else:
            model = f"models/{self.model}"
            body = {"requests": [{"model": model, **self._request(t, task)} for t in texts]}
        with _wrong_key_as_auth_error():
            data, request_id = await self._transport.post_json(
                f"{path}:{'embedContent' if single else 'batchEmbedContents'}", body
            )
        error = error_body(data)
        if error is not None:
            raise self._transport.stream_error(error, request_id)
        if isinstance(data, Mapping) and single and isinstance(data.get("embedding"), Mapping):
            entries: Any = [data["embedding"]]
        else:
            entries = data.get("embeddings") if isinstance(data, Mapping) else None
        if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
            raise ProviderError(
                f"{PROVIDER} answered an embedding request without embeddings",
                provider=PROVIDER,
                request_id=request_id,
                body=data,
                retryable=False,
            )
        try:
            return vectors_of(
                [entry.get("values") for entry in entries], expected=len(texts), provider=PROVIDER
            )
        except ProviderError as exc:
            exc.request_id = request_id
            raise


def gemini_embeddings(
    model: str = "gemini-embedding-001",
    api_key: ApiKey = None,
    *,
    base_url: str = DEFAULT_BASE_URL,
    api_key_env: str = _DEFAULT_KEY_ENV,
    output_dimensionality: int | None = None,
    **options: Unpack[EmbeddingHttpOptions],
) -> GeminiEmbeddings:
    """A Gemini embedding model (`gemini-embedding-001`, `text-embedding-004`, ...).

    `api_key`: a string, a zero-argument callable called on every request, or None to read
    `api_key_env` on every request (the default `GEMINI_API_KEY` falls back to
    `GOOGLE_API_KEY`). `base_url` is the API root (`/v1beta/models/...` is appended).
    `output_dimensionality` asks for shorter vectors. Task-typed: see `GeminiEmbeddings`.
    """
    return GeminiEmbeddings(
        model,
        api_key,
        base_url=base_url,
        api_key_env=api_key_env,
        output_dimensionality=output_dimensionality,
        **options,
    )
