"""Middleware for embedding models: retries (`RetryingEmbeddingModel`) and a span, a log line
and metrics per call (`ObservableEmbeddingModel`), as `RetryingModel` and `ObservableModel`
give chat models."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from agent_runtime.llm._embeddings import EmbeddingModel, EmbeddingTask, check_embed_input
from agent_runtime.llm._sync import run_sync
from agent_runtime.llm.errors import LLMError
from agent_runtime.llm.middleware.retrying import RetryHook, RetrySchedule, Sleep
from agent_runtime.llm.types import ModelInfo
from agent_runtime.telemetry import gen_ai_histograms
from agent_runtime.telemetry import meter as default_meter
from agent_runtime.telemetry import tracer as default_tracer
from supervisors._log import get_logger

__all__ = ["EmbeddingMiddleware", "ObservableEmbeddingModel", "RetryingEmbeddingModel"]

log = get_logger(__name__)


class EmbeddingMiddleware:
    """An `EmbeddingModel` wrapping one: delegates `embed` unchanged (subclasses add one
    behaviour); `embed_sync` runs this wrapper's `embed` on the sync bridge."""

    def __init__(self, inner: EmbeddingModel) -> None:
        if not callable(getattr(inner, "embed", None)):
            raise TypeError(
                f"{type(self).__name__} wraps an EmbeddingModel (with an async embed), "
                f"got {type(inner).__name__}"
            )
        self.inner = inner

    @property
    def info(self) -> ModelInfo:
        """The wrapped model's info (provider and model `unknown` when it has none)."""
        info = getattr(self.inner, "info", None)
        if isinstance(info, ModelInfo):
            return info
        return ModelInfo(provider="unknown", model=type(self.inner).__name__)

    async def embed(
        self, texts: Sequence[str], *, task: EmbeddingTask | None = None
    ) -> list[list[float]]:
        """The wrapped model's vectors."""
        return await self.inner.embed(texts, task=task)

    def embed_sync(
        self,
        texts: Sequence[str],
        *,
        task: EmbeddingTask | None = None,
        timeout: float | None = None,
    ) -> list[list[float]]:
        """`embed` on the sync bridge loop, waiting up to `timeout` seconds.

        Raises:
            as `embed`; RuntimeError: called from a running event loop;
            TimeoutError: `timeout` passed (the call was cancelled).
        """
        check_embed_input(texts, task)
        return run_sync(self.embed(texts, task=task), timeout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


class RetryingEmbeddingModel(RetrySchedule, EmbeddingMiddleware):
    """Retries the `LLMError`s `is_retryable` allows (rate limits, 5xx, network failures;
    never authentication, permission or invalid-request errors), with `RetryingModel`'s capped,
    jittered exponential backoff and its honouring of `retry_after`. Bad input is raised at
    once, never retried; after the last retry the last error is raised.
    """

    retry_event = "llm.embed.retry.scheduled"

    def __init__(
        self,
        inner: EmbeddingModel,
        *,
        max_retries: int = 3,
        base_delay: float = 2.0,
        max_delay: float = 30.0,
        max_retry_after: float = 120.0,
        jitter: float = 0.1,
        sleep: Sleep = asyncio.sleep,
        on_retry: RetryHook | None = None,
    ) -> None:
        EmbeddingMiddleware.__init__(self, inner)
        RetrySchedule.__init__(
            self,
            max_retries=max_retries,
            base_delay=base_delay,
            max_delay=max_delay,
            max_retry_after=max_retry_after,
            jitter=jitter,
            sleep=sleep,
            on_retry=on_retry,
        )

    async def embed(
        self, texts: Sequence[str], *, task: EmbeddingTask | None = None
    ) -> list[list[float]]:
        """The wrapped model's vectors, with retries.

        Raises:
            TypeError, ValueError: bad input (not retried).
            LLMError: not retryable, or still failing after `max_retries` retries.
        """
        check_embed_input(texts, task)
        attempt = 0
        while True:
            try:
                return await self.inner.embed(texts, task=task)
            except LLMError as error:
                attempt += 1
                if not self._should_retry(error, attempt):
                    raise
                await self._wait_before(attempt, error, None)


class ObservableEmbeddingModel(EmbeddingMiddleware):
    """Wraps every call in an `embeddings {model}` CLIENT span and logs its outcome.

    Span attributes follow the OpenTelemetry GenAI conventions (`gen_ai.operation.name` =
    `embeddings`, `gen_ai.provider.name`, `gen_ai.request.model`,
    `gen_ai.embeddings.dimension.count`), plus `agent_runtime.embeddings.task` and
    `agent_runtime.embeddings.input_count`; failures set the span status to ERROR with
    `error.type`. The `gen_ai.client.operation.duration` histogram records every call. Texts
    are never logged (only their count).
    """

    def __init__(
        self,
        inner: EmbeddingModel,
        *,
        tracer: trace.Tracer | None = None,
        meter: metrics.Meter | None = None,
    ) -> None:
        super().__init__(inner)
        self._tracer = tracer or default_tracer()
        self._duration, _ = gen_ai_histograms(meter or default_meter())

    async def embed(
        self, texts: Sequence[str], *, task: EmbeddingTask | None = None
    ) -> list[list[float]]:
        """The wrapped model's vectors, observed."""
        info = self.info
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "embeddings",
            "gen_ai.provider.name": info.provider,
            "gen_ai.request.model": info.model,
        }
        count = len(texts) if isinstance(texts, Sequence) else 0
        span = self._tracer.start_span(
            f"embeddings {info.model}",
            kind=SpanKind.CLIENT,
            attributes={
                **attrs,
                "agent_runtime.embeddings.task": task or "",
                "agent_runtime.embeddings.input_count": count,
            },
        )
        started = time.monotonic()
        metric_attrs = {k: attrs[k] for k in ("gen_ai.operation.name", "gen_ai.provider.name")}
        metric_attrs["gen_ai.request.model"] = info.model
        try:
            vectors = await self.inner.embed(texts, task=task)
        except BaseException as error:
            kind = error.code if isinstance(error, LLMError) else type(error).__name__
            span.set_attribute("error.type", kind)
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, str(error)))
            span.end()
            self._duration.record(time.monotonic() - started, {**metric_attrs, "error.type": kind})
            log.warning(
                "llm.embed.failed",
                provider=info.provider,
                model=info.model,
                texts=count,
                seconds=round(time.monotonic() - started, 4),
                error=kind,
                status=getattr(error, "status", None),
            )
            raise
        elapsed = time.monotonic() - started
        dimensions = len(vectors[0]) if vectors else 0
        span.set_attribute("gen_ai.embeddings.dimension.count", dimensions)
        span.end()
        self._duration.record(elapsed, metric_attrs)
        log.info(
            "llm.embed.finished",
            provider=info.provider,
            model=info.model,
            texts=count,
            dimensions=dimensions,
            seconds=round(elapsed, 4),
        )
        return vectors
