"""A guardrail that fails texts close, by embedding, to a folder of bad examples."""

from __future__ import annotations

import asyncio
import math
import os
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from agent_runtime.guardrails._base import (
    Guardrail,
    GuardrailContext,
    GuardrailMode,
    GuardrailPoint,
    GuardrailResult,
    validated,
)

EmbeddingTask = Literal["query", "document"]


@runtime_checkable
class Embedder(Protocol):
    """What the similarity guardrail needs of an embedding model: the `EmbeddingModel` port's
    `embed` (one vector per text, in order)."""

    async def embed(
        self, texts: list[str], *, task: EmbeddingTask | None = None
    ) -> list[list[float]]: ...


def cosine(a: list[float], b: list[float]) -> float:
    """The cosine similarity of two vectors (0.0 when either is all zeros)."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    return dot / norm if norm else 0.0


class SimilarityGuardrail(Guardrail):
    """Fails a text whose embedding's cosine similarity to any bad example reaches
    `threshold`.

    The examples are the non-empty files of `examples` (a folder; each file one example, UTF-8
    text), read when the guardrail is created and embedded (`task="document"`) on its first
    check, once; each checked text is embedded with `task="query"`. An empty text passes
    without a call. The explanation names the closest example's file and the similarity.

    Raises:
        TypeError: `model` has no `embed` method.
        ValueError: `examples` is not a folder or holds no non-empty file; `threshold` is not
            in [-1, 1].
    """

    def __init__(
        self,
        examples: str | os.PathLike[str],
        model: Embedder,
        *,
        threshold: float = 0.85,
        at: GuardrailPoint = "model_request",
        mode: GuardrailMode = "block",
    ) -> None:
        if not isinstance(model, Embedder):
            raise TypeError(
                "SimilarityGuardrail model must be an embedding model with "
                f"`async embed(texts, *, task=None)`, not {type(model).__name__}"
            )
        folder = Path(examples)
        if not folder.is_dir():
            raise ValueError(f"SimilarityGuardrail examples {str(folder)!r} is not a folder")
        if isinstance(threshold, bool) or not -1.0 <= threshold <= 1.0:
            raise ValueError(f"SimilarityGuardrail threshold must be in [-1, 1], not {threshold!r}")
        self._names: list[str] = []
        self._texts: list[str] = []
        for path in sorted(p for p in folder.iterdir() if p.is_file()):
            text = path.read_text(encoding="utf-8").strip()
            if text:
                self._names.append(path.name)
                self._texts.append(text)
        if not self._texts:
            raise ValueError(
                f"SimilarityGuardrail examples {str(folder)!r} holds no non-empty file"
            )
        self.at, self.mode, self.threshold, self.model = at, mode, threshold, model
        self._vectors: list[list[float]] | None = None
        self._lock: asyncio.Lock | None = None
        validated(self)

    async def _examples(self) -> list[list[float]]:
        if self._vectors is None:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                if self._vectors is None:
                    vectors = await self.model.embed(list(self._texts), task="document")
                    if len(vectors) != len(self._texts):
                        raise ValueError(
                            f"the embedding model returned {len(vectors)} vectors for "
                            f"{len(self._texts)} examples"
                        )
                    self._vectors = vectors
        return self._vectors

    async def check(self, text: str, *, context: GuardrailContext) -> GuardrailResult:
        """Failed when `text` is at least `threshold` similar to a bad example."""
        if not text.strip():
            return GuardrailResult(True)
        examples = await self._examples()
        (vector,) = await self.model.embed([text], task="query")
        score, best = max((cosine(vector, e), i) for i, e in enumerate(examples))
        if score >= self.threshold:
            return GuardrailResult(
                False,
                f"the text is {score:.3f} similar to the bad example {self._names[best]!r} "
                f"(threshold {self.threshold})",
            )
        return GuardrailResult(True)
