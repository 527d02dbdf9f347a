"""Logging and tracing wiring: structlog configured once, OpenTelemetry tracer and meter.

Library code only calls `structlog.get_logger(__name__)` and the accessors here; nothing is
configured at import time. `configure_logging` is called by `Runtime.start` and the CLI, and
leaves alone a structlog that the application configured itself.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any, TextIO

import structlog
from opentelemetry import metrics, trace

from agent_runtime.config import TelemetryConfig

_lock = threading.Lock()
_configured_by_us = False

INSTRUMENTATION_NAME = "agent_runtime"


def configure_logging(
    config: TelemetryConfig | None = None, *, stream: TextIO | None = None, force: bool = False
) -> bool:
    """Configure structlog for the runtime, once per process.

    `log_format = "auto"` renders for humans when `stream` (default stderr) is a terminal and
    as JSON lines otherwise. Returns True if this call configured structlog; False if it was
    already configured (by this function or by the application) and `force` is False.
    """
    global _configured_by_us
    config = config or TelemetryConfig()
    stream = stream or sys.stderr
    with _lock:
        if not force and (_configured_by_us or structlog.is_configured()):
            return False
        fmt = config.log_format
        if fmt == "auto":
            fmt = "console" if stream.isatty() else "json"
        renderer: Any = (
            structlog.dev.ConsoleRenderer()
            if fmt == "console"
            else structlog.processors.JSONRenderer()
        )
        processors: list[Any] = [
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
        ]
        if fmt == "json":
            processors.append(structlog.processors.dict_tracebacks)
        processors.append(renderer)
        structlog.configure(
            processors=processors,
            wrapper_class=structlog.make_filtering_bound_logger(
                logging.getLevelNamesMapping()[config.log_level.upper()]
            ),
            logger_factory=structlog.PrintLoggerFactory(stream),
            cache_logger_on_first_use=False,
        )
        _configured_by_us = True
        return True


def telemetry_enabled() -> bool:
    """Whether an OpenTelemetry SDK (a tracer or a meter provider) is installed: without one,
    spans and metrics are no-ops and the runtime skips the work of recording them."""
    tracing = not isinstance(
        trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider
    )
    provider = metrics.get_meter_provider()
    metering = not (
        isinstance(provider, metrics.NoOpMeterProvider)
        or type(provider).__name__.startswith("_Proxy")
    )
    return tracing or metering


def tracer() -> trace.Tracer:
    """The runtime's OpenTelemetry tracer (a no-op until the application installs an SDK)."""
    return trace.get_tracer(INSTRUMENTATION_NAME)


def meter() -> metrics.Meter:
    """The runtime's OpenTelemetry meter (a no-op until the application installs an SDK)."""
    return metrics.get_meter(INSTRUMENTATION_NAME)
