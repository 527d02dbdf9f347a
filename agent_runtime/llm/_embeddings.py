"""The EmbeddingModel port, input checks, and the base of the HTTP embedding adapters.

An embedding model turns texts into vectors. `task` says what the vectors are for
(`"query"`: a search text; `"document"`: a text to be found), for providers whose
models embed the two differently (Gemini's `RETRIEVAL_QUERY` / `RETRIEVAL_DOCUMENT`);
None leaves it to the provider's default.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from agent_runtime.llm._sync import run_sync
from agent_runtime.llm.errors import ProviderError
from agent_runtime.llm.types import ModelInfo

EmbeddingTask = Literal["query", "document"]
"""What the vectors are for: a search query, or a document to be searched."""
EMBEDDING_TASKS: tuple[str, ...] = get_args(EmbeddingTask)

__all__ = [
    "EMBEDDING_TASKS",
    "BaseEmbeddingModel",
    "EmbeddingModel",
    "EmbeddingTask",
    "check_embed_input",
    "vectors_of",
]


@runtime_checkable
class EmbeddingModel(Protocol):
    """The port to every embedding model: async first, with a sync twin for scripts.

    `embed` returns one vector per text, in the order given; every vector of one call has the
    same length. Bad input (an empty list, a bare str, an item that is not a non-empty str, an
    unknown `task`) raises `TypeError`/`ValueError` before any request; provider failures
    raise the `LLMError` taxonomy of the chat adapters.
    """

    async def embed(
        self, texts: Sequence[str], *, task: EmbeddingTask | None = None
    ) -> list[list[float]]:
        """One vector per text, in order."""
        ...

    def embed_sync(
        self,
        texts: Sequence[str],
        *,
        task: EmbeddingTask | None = None,
        timeout: float | None = None,
    ) -> list[list[float]]:
        """`embed` for code without an event loop."""
        ...


def check_embed_input(texts: object, task: object) -> list[str]:
    """`texts` as a list after checking it and `task`.

    Raises:
        TypeError: `texts` is a str or bytes (not a list of them) or not a sequence, or an
            item is not a str (the message names its index and type).
        ValueError: `texts` is empty, an item is empty or only whitespace (providers reject
            those), or `task` is not "query", "document" or None.
    """
    if task is not None and task not in EMBEDDING_TASKS:
        expected = ", ".join(repr(t) for t in EMBEDDING_TASKS)
        raise ValueError(f"invalid embedding task {task!r} (expected {expected} or None)")
    if isinstance(texts, str | bytes):
        raise TypeError(
            f"embed() takes a list of str, got a single {type(texts).__name__}: wrap it, "
            "embed([text])"
        )
    if not isinstance(texts, Sequence):
        raise TypeError(f"embed() takes a list of str, got {type(texts).__name__}")
    if not texts:
        raise ValueError("embed() got an empty list of texts (expected at least one str)")
    items = list(texts)
    for index, text in enumerate(items):
        if not isinstance(text, str):
            raise TypeError(
                f"embed() texts[{index}] is {type(text).__name__}, not str: {text!r:.80}"
            )
        if not text.strip():
            raise ValueError(f"embed() texts[{index}] is empty (providers reject empty input)")
    return items


def vectors_of(
    raw: Sequence[Any], *, expected: int, provider: str, mean_pool_tokens: bool = False
) -> list[list[float]]:
    """`raw` checked as `expected` vectors of finite numbers, all of one length.

    With `mean_pool_tokens`, an entry that is one vector per token (what a llama.cpp server
    answers for a model without a pooling type, such as a chat model) becomes the mean of
    its token vectors; without it, such an entry is an error.

    Raises:
        ProviderError: a count that does not match, a vector that is not a non-empty list of
            numbers, token vectors not asked to be pooled, or vectors of different lengths
            (not retryable: the server answers this request so every time).
    """

    def fail(reason: str) -> ProviderError:
        return ProviderError(
            f"{provider} answered an embedding request with {reason}",
            provider=provider,
            retryable=False,
        )

    if len(raw) != expected:
        raise fail(f"{len(raw)} vectors for {expected} texts")
    vectors: list[list[float]] = []
    for index, entry in enumerate(raw):
        if not isinstance(entry, list) or not entry:
            raise fail(f"vector {index} not a non-empty list ({type(entry).__name__})")
        rows: list[Any] = entry if isinstance(entry[0], list) else [entry]
        if rows is entry and not mean_pool_tokens:
            raise fail(f"one vector per token for text {index} (a model without pooling)")
        floats = [_numbers(row, index, fail) for row in rows]
        if len({len(row) for row in floats}) > 1:
            raise fail(f"token vectors of different lengths for text {index}")
        vectors.append([math.fsum(column) / len(floats) for column in zip(*floats, strict=True)])
    if len({len(v) for v in vectors}) > 1:
        raise fail(f"vectors of different lengths {sorted({len(v) for v in vectors})}")
    return vectors


def _numbers(row: Any, index: int, fail: Callable[[str], ProviderError]) -> list[float]:
    if not isinstance(row, list) or not row:
        raise fail(f"vector {index} not a non-empty list of numbers")
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in row):
        raise fail(f"vector {index} holding something other than numbers")
    floats = [float(x) for x in row]
    if not all(math.isfinite(x) for x in floats):
        raise fail(f"vector {index} holding NaN or infinity")
    return floats


class BaseEmbeddingModel(ABC):
    """The shared part of the embedding adapters: input checks, batching, the sync twin.

    Guarantees: `embed` checks its input before any request; texts are sent in batches of at
    most `max_batch_size` (the provider's per-call limit), one batch after the other, and the
    vectors come back in the order of `texts`; a failing batch raises its error (no partial
    result). Subclasses implement `_embed_batch`.
    """

    max_batch_size: int = 2048

    @property
    @abstractmethod
    def info(self) -> ModelInfo:
        """Provider and model name."""

    @abstractmethod
    async def _embed_batch(self, texts: list[str], task: EmbeddingTask | None) -> list[list[float]]:
        """The vectors of one batch (at most `max_batch_size` texts), checked by `vectors_of`."""

    async def embed(
        self, texts: Sequence[str], *, task: EmbeddingTask | None = None
    ) -> list[list[float]]:
        """One vector per text, in order (see `EmbeddingModel`).

        Raises:
            TypeError, ValueError: bad input (named), before any request.
            LLMError: the provider's failure, mapped as for the chat adapters.
        """
        items = check_embed_input(texts, task)
        size = self.max_batch_size
        vectors: list[list[float]] = []
        for start in range(0, len(items), size):
            vectors.extend(await self._embed_batch(items[start : start + size], task))
        if len({len(v) for v in vectors}) > 1:
            raise ProviderError(
                f"{self.info.provider} answered batches of one request with vectors of "
                "different lengths",
                provider=self.info.provider,
                retryable=False,
            )
        return vectors

    def embed_sync(
        self,
        texts: Sequence[str],
        *,
        task: EmbeddingTask | None = None,
        timeout: float | None = None,
    ) -> list[list[float]]:
        """`embed` on the sync bridge loop, waiting up to `timeout` seconds.

        Raises:
            as `embed`; RuntimeError: called from a running event loop (await `embed`);
            TimeoutError: `timeout` passed (the call was cancelled).
        """
        check_embed_input(texts, task)  # bad input raises here, not on the bridge thread
        return run_sync(self.embed(texts, task=task), timeout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.info.provider}:{self.info.model})"
