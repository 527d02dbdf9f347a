"""ObservableModel: a structlog line and an OpenTelemetry span (GenAI conventions) per call."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from agent_runtime.abort import AbortSignal
from agent_runtime.llm.base import ChatModel
from agent_runtime.llm.builder import ChatResponseBuilder
from agent_runtime.llm.errors import LLMError
from agent_runtime.llm.middleware._base import Middleware
from agent_runtime.llm.types import ChatRequest, ChatResponse, StreamChunk
from agent_runtime.telemetry import gen_ai_histograms
from agent_runtime.telemetry import log_content as configured_log_content
from agent_runtime.telemetry import meter as default_meter
from agent_runtime.telemetry import tracer as default_tracer
from supervisors._log import get_logger

log = get_logger(__name__)


class ObservableModel(Middleware):
    """Wraps every call in a `chat {model}` CLIENT span and logs its outcome.

    Span attributes follow the OpenTelemetry GenAI semantic conventions
    (`gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`,
    `gen_ai.request.temperature`, `gen_ai.request.max_tokens`, `gen_ai.response.finish_reasons`,
    `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`); failures set the span status to
    ERROR with `error.type`. Metrics: `gen_ai.client.token.usage` and
    `gen_ai.client.operation.duration` histograms. Prompt and answer text are logged only with
    `log_content=True`; None (the default) follows `[telemetry] log_content` of the runtime's
    config (`agent_runtime.telemetry.log_content()`), read at each call.
    """

    def __init__(
        self,
        inner: ChatModel,
        *,
        log_content: bool | None = None,
        tracer: trace.Tracer | None = None,
        meter: metrics.Meter | None = None,
    ) -> None:
        super().__init__(inner)
        self.log_content = log_content
        self._tracer = tracer or default_tracer()
        self._duration, self._tokens = gen_ai_histograms(meter or default_meter())

    def _content(self) -> bool:
        return configured_log_content() if self.log_content is None else self.log_content

    def _attributes(self, request: ChatRequest) -> dict[str, Any]:
        info = self.inner.info
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": info.provider,
            "gen_ai.request.model": info.model,
        }
        if request.temperature is not None:
            attrs["gen_ai.request.temperature"] = request.temperature
        if request.max_output_tokens is not None:
            attrs["gen_ai.request.max_tokens"] = request.max_output_tokens
        return attrs

    def _start(self, request: ChatRequest) -> tuple[trace.Span, dict[str, Any], float]:
        attrs = self._attributes(request)
        span = self._tracer.start_span(
            f"chat {attrs['gen_ai.request.model']}", kind=SpanKind.CLIENT, attributes=attrs
        )
        fields: dict[str, Any] = {
            "provider": attrs["gen_ai.provider.name"],
            "model": attrs["gen_ai.request.model"],
        }
        if self._content():
            fields["prompt"] = [m.model_dump(mode="json") for m in request.messages]
        log.debug("llm.call.started", **fields)
        return span, attrs, time.monotonic()

    def _finish(
        self, span: trace.Span, attrs: dict[str, Any], started: float, response: ChatResponse
    ) -> None:
        elapsed = time.monotonic() - started
        usage = response.usage
        span.set_attribute("gen_ai.response.finish_reasons", [response.stop_reason])
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        if response.request_id:
            span.set_attribute("gen_ai.response.id", response.request_id)
        span.end()
        metric_attrs = {
            k: attrs[k]
            for k in ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model")
        }
        self._duration.record(elapsed, metric_attrs)
        self._tokens.record(usage.input_tokens, {**metric_attrs, "gen_ai.token.type": "input"})
        self._tokens.record(usage.output_tokens, {**metric_attrs, "gen_ai.token.type": "output"})
        fields: dict[str, Any] = {
            "provider": attrs["gen_ai.provider.name"],
            "model": attrs["gen_ai.request.model"],
            "seconds": round(elapsed, 4),
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "stop_reason": response.stop_reason,
        }
        if self._content():
            fields["answer"] = response.text
        log.info("llm.call.finished", **fields)

    def _fail(
        self, span: trace.Span, attrs: dict[str, Any], started: float, error: BaseException
    ) -> None:
        kind = error.code if isinstance(error, LLMError) else type(error).__name__
        span.set_attribute("error.type", kind)
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, str(error)))
        span.end()
        log.warning(
            "llm.call.failed",
            provider=attrs["gen_ai.provider.name"],
            model=attrs["gen_ai.request.model"],
            seconds=round(time.monotonic() - started, 4),
            error=kind,
            status=getattr(error, "status", None),
        )

    async def generate(
        self, request: ChatRequest, *, signal: AbortSignal | None = None
    ) -> ChatResponse:
        """The inner answer, observed."""
        span, attrs, started = self._start(request)
        try:
            response = await self.inner.generate(request, signal=signal)
        except BaseException as error:
            self._fail(span, attrs, started, error)
            raise
        self._finish(span, attrs, started, response)
        return response

    def stream(
        self, request: ChatRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StreamChunk]:
        """The inner stream, observed from its first `anext` to its end."""
        return self._observed_stream(request, signal)

    async def _observed_stream(
        self, request: ChatRequest, signal: AbortSignal | None
    ) -> AsyncIterator[StreamChunk]:
        span, attrs, started = self._start(request)
        info = self.inner.info
        builder = ChatResponseBuilder(model=info.model, provider=info.provider)
        try:
            async for chunk in self.inner.stream(request, signal=signal):
                builder.add(chunk)
                yield chunk
        except BaseException as error:
            self._fail(span, attrs, started, error)
            raise
        self._finish(span, attrs, started, builder.build(allow_unfinished=True))
