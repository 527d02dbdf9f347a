"""Logging and tracing wiring: structlog configured once, OpenTelemetry tracer and meter.

Library code only calls `structlog.get_logger(__name__)` and the accessors here; nothing is
configured at import time. `configure_logging` is called by the CLI, and by `Runtime.start`
when asked (`configure_logging=True` or `[telemetry] configure_logging`); it leaves alone a
structlog that the application configured itself. Until structlog is configured, the
library's events go to the standard library's `logging` (`supervisors._log`). Likewise no
OpenTelemetry provider is installed unless `[telemetry] exporter` asks for one
(`install_exporter`, called by `Runtime.start`): by default spans and metrics go wherever
the application's own SDK sends them, and nowhere (at almost no cost) without one.

What the logs it configures never show, whatever the level and whichever code logs:
- frame locals: tracebacks list files, lines and functions, never the values of variables
  (which would hold request headers, prompts and tool arguments);
- credentials: the values of `Authorization`, `Proxy-Authorization` and `api_key` under any
  prefix (`x-api-key`, `x-goog-api-key`, `OPENAI_API_KEY`; any case, `-` or `_`) in logged
  mappings, headers, options and objects, `Bearer` tokens, `key=` / `api_key=` URL
  parameters and strings shaped like OpenAI, Anthropic, Google or Groq keys, in values,
  messages and tracebacks alike: each becomes `REDACTED`. Values, not words: in text, what
  follows `api_key=` or `Authorization:` is redacted when it is quoted, when it follows the
  `=` or `:` directly, or when it is shaped like a key (a digit in it, or 20 characters);
  prose such as "pass api_key= (for a keyless server)" is left as it is;
- content, unless `log_content = true`: the value of a key in `CONTENT_KEYS` (prompts,
  answers, messages, tool arguments) becomes `HIDDEN`; numbers (e.g. a count of prompts) stay.
Exception messages and failure reasons are logged as raised (they say what failed): a tool
whose own exception message quotes its arguments puts them in its failure's line. An
application that configures structlog itself can add `hide_content` and `redact_secrets` to
its processors (before its renderer, after rendering tracebacks without locals).
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import sys
import threading
from collections.abc import Mapping
from typing import Any, TextIO

import structlog
from opentelemetry import metrics, trace
from structlog.tracebacks import ExceptionDictTransformer
from structlog.typing import EventDict, WrappedLogger

from agent_runtime._errors import ConfigError
from agent_runtime.config import TelemetryConfig

_lock = threading.Lock()
_configured_by_us = False
_log_content = False  # `[telemetry] log_content` of the last configure_logging call
_exporter_installed: str | None = None  # the exporter install_exporter installed, if any

INSTRUMENTATION_NAME = "agent_runtime"

REDACTED = "<redacted>"
"""What a logged credential is replaced by."""

HIDDEN = "<hidden: log_content = false>"
"""What logged content is replaced by while `log_content` is false."""

CONTENT_KEYS = frozenset(
    {
        "prompt",
        "prompts",
        "system_prompt",
        "answer",
        "text",
        "content",
        "messages",
        "arguments",
        "raw_arguments",
        "response",
        "completion",
        "body",
    }
)
"""Log keys whose values are prompt, response or tool-argument text."""

# `authorization`, `proxy-authorization`, and `api_key` with any prefix: `x-api-key`,
# `x-goog-api-key`, `OPENAI_API_KEY` (not `api_key_env`, which names a variable).
_SECRET_NAMES = r"(?:proxy[-_]?)?authorization|(?:[a-z0-9]+[-_])*api[-_]?key"
_SECRET_KEY = re.compile(rf"(?i)(?:{_SECRET_NAMES})")
# In text: a named secret (`Authorization: Bearer x`, `'x-api-key': 'x'`, `api_key=x`), a
# bearer token, a key in a URL's query, and the shapes of well-known provider keys. A name's
# value is redacted, never the words after it: a quoted value, or one right after the `=` or
# `:` that does not open a bracket, or after a space only a token shaped like a key (a digit
# in it, or 20 characters long), so "pass api_key= (for a keyless server)" stays as it is.
_KEY_CHAR = r"[a-z0-9._~+/=-]"
_SECRET_TEXT = re.compile(
    rf"""(?ix)
    (?P<name>\b(?:{_SECRET_NAMES})\b["']?
      (?: \s*[:=]\s*["'](?:(?:bearer|basic)\s+)?
        | [:=](?:(?:bearer|basic)\s+)?(?![\s(<\[{{])
        | \s*[:=]\s+(?:(?:bearer|basic)\s+)?(?={_KEY_CHAR}*\d|{_KEY_CHAR}{{20}})
      )
    )[^\s"',;&)}}\]]+
    | (?P<bearer>\bbearer\s+)[a-z0-9._~+/=-]{{8,}}
    | (?P<query>[?&](?:key|api[-_]?key|access_token)=)[^&\s"'#]+
    | \bsk-[a-z0-9_-]{{16,}} | \bAIza[0-9a-z_-]{{30,}} | \bgsk_[a-z0-9]{{20,}}
    """
)
_MAX_DEPTH = 8

log = structlog.get_logger(__name__)


def configure_logging(
    config: TelemetryConfig | None = None, *, stream: TextIO | None = None, force: bool = False
) -> bool:
    """Configure structlog for the runtime, once per process.

    `log_format = "auto"` renders for humans when `stream` (default stderr) is a terminal and
    as JSON lines otherwise (tracebacks as structured frames). Either way the lines keep out
    what the module docstring lists: locals, credentials and (unless `log_content`) content.
    Returns True if this call configured structlog; False if it was already configured (by
    this function or by the application) and `force` is False.

    `config.log_content` is recorded in every case (see `log_content()`): it decides what the
    runtime puts into its log events, whoever renders them.
    """
    global _configured_by_us, _log_content
    config = config or TelemetryConfig()
    stream = stream or sys.stderr
    with _lock:
        _log_content = config.log_content
        if not force and (_configured_by_us or structlog.is_configured()):
            return False
        fmt = config.log_format
        if fmt == "auto":
            fmt = "console" if stream.isatty() else "json"
        processors: list[Any] = [
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
        ]
        if not config.log_content:
            processors.append(hide_content)
        # Tracebacks are rendered before redaction (so it sees them), and without locals.
        if fmt == "json":
            processors.append(
                structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False))
            )
            renderer: Any = structlog.processors.JSONRenderer()
        else:
            processors.append(structlog.processors.format_exc_info)
            renderer = structlog.dev.ConsoleRenderer()
        processors += [redact_secrets, renderer]
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


def record_log_content(config: TelemetryConfig) -> None:
    """Record `config.log_content` (see `log_content()`) without configuring anything:
    `Runtime.start` does so whether or not it configures logging."""
    global _log_content
    with _lock:
        _log_content = config.log_content


def hide_content(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """A structlog processor: replace the values of `CONTENT_KEYS` by `HIDDEN` (numbers and
    None stay: they count or mark, they do not quote)."""
    for key in CONTENT_KEYS.intersection(event_dict):
        value = event_dict[key]
        if value is not None and not isinstance(value, int | float):
            event_dict[key] = HIDDEN
    return event_dict


def redact_secrets(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """A structlog processor: replace every credential in the event by `REDACTED`.

    Values under a credential's name are replaced whole, at any depth of mappings and lists;
    strings are scrubbed of the credential patterns; other objects are logged as their
    scrubbed `repr` (which is what the renderers would print of them).
    """
    return {key: REDACTED if _is_secret_key(key) else _scrub(v) for key, v in event_dict.items()}


def redact_text(text: str) -> str:
    """`text` with every credential pattern (see the module docstring) replaced."""
    return _SECRET_TEXT.sub(_replacement, text)


def _replacement(match: re.Match[str]) -> str:
    prefix = match.group("name") or match.group("bearer") or match.group("query") or ""
    return prefix + REDACTED


def _is_secret_key(key: object) -> bool:
    return isinstance(key, str) and _SECRET_KEY.fullmatch(key) is not None


def _scrub(value: Any, depth: int = 0) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return redact_text(value)
    if depth < _MAX_DEPTH:
        if isinstance(value, Mapping):
            return {
                k: REDACTED if _is_secret_key(k) else _scrub(v, depth + 1) for k, v in value.items()
            }
        if isinstance(value, list | tuple | set | frozenset):
            return [_scrub(v, depth + 1) for v in value]
    return redact_text(repr(value))


def log_content() -> bool:
    """Whether prompt, response and tool-argument text may be logged: `[telemetry]
    log_content` as the last `Runtime.start` (or `configure_logging` call) set it; False
    until one did."""
    return _log_content


def telemetry_enabled() -> bool:
    """Whether an OpenTelemetry SDK (a tracer or a meter provider) is installed: without one,
    spans and metrics are no-ops and the runtime skips the work of recording them."""
    return _sdk_installed()


OTLP_PACKAGE = "opentelemetry-exporter-otlp"
"""The optional package `telemetry.exporter = "otlp"` needs (the `otlp` extra)."""


def install_exporter(config: TelemetryConfig | None = None) -> bool:
    """Install the global OpenTelemetry providers `config.exporter` asks for, once per process.

    - `"none"` (the default): nothing is installed; the application's own SDK, if any, gets
      the spans and metrics.
    - `"console"`: a tracer provider printing each span to stdout as it ends (batched) and a
      meter provider printing the metrics to stdout every 60 s and at exit.
    - `"otlp"`: both export over OTLP (HTTP/protobuf) to where the standard
      `OTEL_EXPORTER_OTLP_*` variables say (by default http://localhost:4318); needs the
      optional package `opentelemetry-exporter-otlp` (`pip install 'agent-runtime[otlp]'`).
    `service.name` is "agent-runtime" unless `OTEL_SERVICE_NAME` says otherwise.

    OpenTelemetry lets a process set its providers once: the first call that installs them
    wins, later calls (another `Runtime.start`) change nothing, and providers the
    application installed itself are never replaced (a warning says the exporter was not
    installed). Returns True if this call installed the providers.

    Raises:
        ConfigError: `"otlp"` without the `opentelemetry-exporter-otlp` package.
    """
    global _exporter_installed
    config = config or TelemetryConfig()
    kind = config.exporter
    if kind == "none":
        return False
    span_exporter, metric_exporter = _exporters(kind)  # raises before anything is installed
    with _lock:
        if _exporter_installed is not None:
            if _exporter_installed != kind:
                log.warning(
                    "telemetry.exporter.ignored", exporter=kind, installed=_exporter_installed
                )
            return False
        if _sdk_installed():
            log.warning("telemetry.exporter.not_installed", exporter=kind, reason="sdk_installed")
            return False
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        names = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "agent-runtime"}
        resource = Resource.create(names)
        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter()))
        reader = PeriodicExportingMetricReader(metric_exporter())
        trace.set_tracer_provider(tracer_provider)
        metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=[reader]))
        _exporter_installed = kind
    log.info("telemetry.exporter.installed", exporter=kind)
    return True


def _exporters(kind: str) -> tuple[Any, Any]:
    """The span and metric exporter classes of `kind` ("console" or "otlp")."""
    if kind == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter, ConsoleMetricExporter
    otlp = "opentelemetry.exporter.otlp.proto.http"
    try:  # optional: imported by name, so mypy needs no stubs of a package it may not have
        spans = importlib.import_module(f"{otlp}.trace_exporter")
        metric_points = importlib.import_module(f"{otlp}.metric_exporter")
    except ImportError as exc:
        raise ConfigError(
            f"telemetry.exporter = {kind!r} needs the package {OTLP_PACKAGE}, which is not "
            f"installed: pip install {OTLP_PACKAGE} (or agent-runtime[otlp]), or set "
            'telemetry.exporter to "console" or "none"'
        ) from exc
    return spans.OTLPSpanExporter, metric_points.OTLPMetricExporter


def _sdk_installed() -> bool:
    """Whether a tracer or meter provider other than the API's default is installed."""
    if not isinstance(trace.get_tracer_provider(), _API_TRACER_PROVIDERS):
        return True
    provider = metrics.get_meter_provider()
    return not (
        isinstance(provider, metrics.NoOpMeterProvider)
        or type(provider).__name__.startswith("_Proxy")
    )


# The API's own tracer providers: with one of them current, no tracing SDK is installed.
_API_TRACER_PROVIDERS = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)


GEN_AI_SECONDS: tuple[float, ...] = tuple(0.01 * 2**n for n in range(14))  # 0.01 ... 81.92
"""The GenAI conventions' buckets for `gen_ai.client.operation.duration` (seconds)."""

GEN_AI_TOKENS: tuple[int, ...] = tuple(4**n for n in range(14))  # 1, 4, 16, ... 67108864
"""The GenAI conventions' buckets for `gen_ai.client.token.usage`."""


def gen_ai_histograms(m: metrics.Meter) -> tuple[metrics.Histogram, metrics.Histogram]:
    """`gen_ai.client.operation.duration` (s) and `gen_ai.client.token.usage` ({token}) on
    `m`, with the GenAI conventions' buckets. Every caller gets the same two instruments of
    a meter (the agent loop's and `ObservableModel`'s are one)."""
    return (
        m.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Model call duration",
            explicit_bucket_boundaries_advisory=GEN_AI_SECONDS,
        ),
        m.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens per model call",
            explicit_bucket_boundaries_advisory=GEN_AI_TOKENS,
        ),
    )


def tracer() -> trace.Tracer:
    """The runtime's OpenTelemetry tracer (a no-op until the application installs an SDK)."""
    return trace.get_tracer(INSTRUMENTATION_NAME)


def meter() -> metrics.Meter:
    """The runtime's OpenTelemetry meter (a no-op until the application installs an SDK)."""
    return metrics.get_meter(INSTRUMENTATION_NAME)
