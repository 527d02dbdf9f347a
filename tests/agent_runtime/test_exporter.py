"""`[telemetry] exporter`: the library installs no OpenTelemetry provider unless asked; asked,
it installs one at Runtime.start, once per process, never over the application's own; OTLP
needs its optional package. Scenarios that install a provider run in a subprocess each."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from typing import ClassVar

import pytest

from agent_runtime import ConfigError, Runtime, telemetry
from agent_runtime.config import RuntimeConfig, TelemetryConfig
from agent_runtime.testing import ScriptedModel


def run_script(body: str, **env: str) -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent(
        """
        import logging, structlog
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
        """
    ) + textwrap.dedent(body)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def test_by_default_no_provider_is_installed() -> None:
    with Runtime.start(RuntimeConfig()) as runtime:
        runtime.start_agent(("s", "a", 0), model=ScriptedModel(["x"])).run("go", timeout=30)
    assert not telemetry.telemetry_enabled()


def test_otlp_without_its_package_is_an_error_naming_the_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("trace_exporter", "metric_exporter"):  # absent, even where it is installed
        monkeypatch.setitem(sys.modules, f"opentelemetry.exporter.otlp.proto.http.{name}", None)
    config = RuntimeConfig(telemetry=TelemetryConfig(exporter="otlp"))
    with pytest.raises(ConfigError, match="opentelemetry-exporter-otlp"):
        Runtime.start(config)
    assert not telemetry.telemetry_enabled()  # nothing was installed


def test_an_unknown_exporter_is_rejected_by_the_config() -> None:
    with pytest.raises(ValueError, match="exporter"):
        TelemetryConfig(exporter="jaeger")  # type: ignore[arg-type]


_TWICE = """
from opentelemetry import trace
from agent_runtime import Runtime, telemetry
from agent_runtime.config import RuntimeConfig, TelemetryConfig
console = RuntimeConfig(telemetry=TelemetryConfig(exporter="console"))
with Runtime.start(console):
    first = trace.get_tracer_provider()
with Runtime.start(console):
    assert trace.get_tracer_provider() is first
    assert telemetry.install_exporter(console.telemetry) is False
print("provider", type(first).__name__)
"""


def test_the_exporter_is_installed_once_per_process() -> None:
    assert "provider TracerProvider" in run_script(_TWICE).stdout


_APPLICATION_SDK = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from agent_runtime import Runtime
from agent_runtime.config import RuntimeConfig, TelemetryConfig
from agent_runtime.testing import ScriptedModel
mine = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(mine))
trace.set_tracer_provider(provider)
with Runtime.start(RuntimeConfig(telemetry=TelemetryConfig(exporter="console"))) as runtime:
    runtime.start_agent(("s", "a", 0), model=ScriptedModel(["x"])).run("go", timeout=30)
assert trace.get_tracer_provider() is provider
print("mine", sorted({s.name for s in mine.get_finished_spans()}))
"""


def test_an_application_provider_is_never_replaced() -> None:
    done = run_script(_APPLICATION_SDK)
    assert "mine ['agent.turn', 'chat scripted', 'invoke_agent a']" in done.stdout
    assert '"name": "invoke_agent a"' not in done.stdout  # the console exporter was not installed


class _Collector(http.server.BaseHTTPRequestHandler):
    paths: ClassVar[list[str]] = []  # the paths POSTed to, across requests

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.paths.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


_OTLP = """
from agent_runtime import Runtime
from agent_runtime.config import RuntimeConfig, TelemetryConfig
from agent_runtime.testing import ScriptedModel
with Runtime.start(RuntimeConfig(telemetry=TelemetryConfig(exporter="otlp"))) as runtime:
    runtime.start_agent(("s", "a", 0), model=ScriptedModel(["x"])).run("go", timeout=30)
"""  # the providers flush their spans and metrics as the process exits


def test_otlp_exports_spans_and_metrics_to_the_configured_endpoint(collector: str) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    _Collector.paths = []
    run_script(_OTLP, OTEL_EXPORTER_OTLP_ENDPOINT=collector)
    assert {"/v1/traces", "/v1/metrics"} <= set(_Collector.paths)
