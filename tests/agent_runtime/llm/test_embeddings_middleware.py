"""Retry and observability middleware for embedding models, over the mock server (issue 16)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agent_runtime.llm import (
    AuthenticationError,
    EmbeddingModel,
    EmbeddingTask,
    NetworkError,
    ObservableEmbeddingModel,
    ProviderError,
    RateLimitError,
    RetryingEmbeddingModel,
    openai_compatible_embeddings,
)
from agent_runtime.testing.mock_server import MockProviderServer


class Waits:
    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


def retrying(server: MockProviderServer, waits: Waits, **options: float) -> RetryingEmbeddingModel:
    inner = openai_compatible_embeddings(server.base_url("openai"), "m")
    return RetryingEmbeddingModel(inner, sleep=waits, jitter=0.0, **options)  # type: ignore[arg-type]


def test_retryable_failures_are_retried_with_backoff(server: MockProviderServer) -> None:
    waits = Waits()
    server.embeddings.fail(
        RateLimitError("slow", 5.0, status=429), (503, {"error": {"message": "busy"}})
    )
    model = retrying(server, waits, base_delay=1.0)
    (vector,) = model.embed_sync(["hello"], timeout=10)
    assert len(vector) == 16 and server.embeddings.calls == 3
    assert waits.seconds == [5.0, 2.0]  # the retry-after hint, then 1 * 2**1


def test_a_non_retryable_failure_is_raised_at_once(server: MockProviderServer) -> None:
    waits = Waits()
    server.embeddings.fail((401, {"error": {"message": "bad key"}}))
    with pytest.raises(AuthenticationError):
        retrying(server, waits).embed_sync(["hello"], timeout=10)
    assert server.embeddings.calls == 1 and not waits.seconds


def test_the_last_error_is_raised_after_max_retries(server: MockProviderServer) -> None:
    waits = Waits()
    server.embeddings.fail(*[(500, {"error": {"message": f"boom {i}"}}) for i in range(3)])
    with pytest.raises(ProviderError, match="boom 2"):
        retrying(server, waits, max_retries=2).embed_sync(["hello"], timeout=10)
    assert server.embeddings.calls == 3 and len(waits.seconds) == 2


def test_a_refused_first_connection_fails_at_once_and_a_later_one_is_retried() -> None:
    """Nothing ever answered: final (issue 35.15); once the server answered: retried."""
    with MockProviderServer() as gone:
        url = gone.base_url("openai")
    waits = Waits()
    model = RetryingEmbeddingModel(
        openai_compatible_embeddings(url, "m"), max_retries=1, sleep=waits
    )
    with pytest.raises(NetworkError) as caught:
        model.embed_sync(["a"], timeout=10)
    assert caught.value.code == "connection_refused" and not waits.seconds
    with MockProviderServer() as server:
        answered = RetryingEmbeddingModel(
            openai_compatible_embeddings(server.base_url("openai"), "m"), max_retries=1, sleep=waits
        )
        answered.embed_sync(["a"], timeout=10)
    with pytest.raises(NetworkError) as caught:
        answered.embed_sync(["a"], timeout=10)
    assert caught.value.retryable and len(waits.seconds) == 1


def test_bad_input_is_never_retried(server: MockProviderServer) -> None:
    waits = Waits()
    with pytest.raises(ValueError, match="empty list"):
        retrying(server, waits).embed_sync([], timeout=10)
    with pytest.raises(TypeError, match=r"texts\[0\] is bytes"):
        asyncio.run(retrying(server, waits).embed([b"x"]))  # type: ignore[list-item]
    assert not server.requests and not waits.seconds


class OnlyEmbed:
    """A hand-written model with nothing but `embed` (what a user's fake looks like)."""

    async def embed(
        self, texts: Sequence[str], *, task: EmbeddingTask | None = None
    ) -> list[list[float]]:
        return [[1.0, float(len(t))] for t in texts]


def test_middleware_wraps_any_object_with_embed_and_refuses_others() -> None:
    model = ObservableEmbeddingModel(RetryingEmbeddingModel(OnlyEmbed()))  # type: ignore[arg-type]
    assert isinstance(model, EmbeddingModel)
    assert model.embed_sync(["ab"], timeout=10) == [[1.0, 2.0]]
    assert model.info.provider == "unknown"
    with pytest.raises(TypeError, match="wraps an EmbeddingModel"):
        RetryingEmbeddingModel(object())  # type: ignore[arg-type]


# -- observability -------------------------------------------------------------------------------


def observed(
    server: MockProviderServer,
) -> tuple[ObservableEmbeddingModel, InMemorySpanExporter, InMemoryMetricReader]:
    exporter = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    inner = openai_compatible_embeddings(server.base_url("openai"), "embed-m")
    model = ObservableEmbeddingModel(inner, tracer=tracing.get_tracer("t"), meter=meter)
    return model, exporter, reader


def test_each_call_gets_an_embeddings_span_and_a_duration(server: MockProviderServer) -> None:
    model, exporter, reader = observed(server)
    model.embed_sync(["a b", "c"], task="document", timeout=10)
    (span,) = exporter.get_finished_spans()
    assert span.name == "embeddings embed-m"
    attrs = dict(span.attributes or {})
    assert attrs["gen_ai.operation.name"] == "embeddings"
    assert attrs["gen_ai.provider.name"] == "openai_compatible"
    assert attrs["gen_ai.request.model"] == "embed-m"
    assert attrs["gen_ai.embeddings.dimension.count"] == 16
    assert attrs["agent_runtime.embeddings.input_count"] == 2
    assert attrs["agent_runtime.embeddings.task"] == "document"
    points = [
        point
        for rm in reader.get_metrics_data().resource_metrics  # type: ignore[union-attr]
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "gen_ai.client.operation.duration"
        for point in m.data.data_points
    ]
    assert [dict(p.attributes or {})["gen_ai.operation.name"] for p in points] == ["embeddings"]


def test_a_failed_call_marks_its_span_as_error(server: MockProviderServer) -> None:
    model, exporter, _ = observed(server)
    server.embeddings.fail(RateLimitError("slow", status=429))
    with pytest.raises(RateLimitError):
        model.embed_sync(["a"], timeout=10)
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {})["error.type"] == "rate_limited"
