"""Run a script under the OpenTelemetry SDK's in-memory span exporter and metric reader, in a
subprocess of its own (a process sets its global providers once), and read back what it
recorded: finished spans, metric snapshots taken with `snapshot(label)`, and `FACTS`."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Any

_PRELUDE = textwrap.dedent(
    """
    import json, logging, sys
    import structlog
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    _exporter, _reader = InMemorySpanExporter(), InMemoryMetricReader()
    _provider = TracerProvider()
    _provider.add_span_processor(SimpleSpanProcessor(_exporter))
    trace.set_tracer_provider(_provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[_reader]))
    FACTS = {}
    _SNAPSHOTS = {}

    def _point(p):
        out = {"attributes": dict(p.attributes)}
        for name in ("value", "count", "sum", "explicit_bounds"):
            if hasattr(p, name):
                value = getattr(p, name)
                out[name] = list(value) if name == "explicit_bounds" else value
        return out

    def snapshot(label):
        found = {}
        data = _reader.get_metrics_data()
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    entry = found.setdefault(m.name, {"unit": m.unit, "points": []})
                    entry["points"].extend(_point(p) for p in m.data.data_points)
        _SNAPSHOTS[label] = found

    def _span(s):
        return {
            "name": s.name,
            "trace_id": s.context.trace_id,
            "span_id": s.context.span_id,
            "parent_id": s.parent.span_id if s.parent else None,
            "attributes": dict(s.attributes),
            "events": [{"name": e.name, "attributes": dict(e.attributes)} for e in s.events],
            "status": s.status.status_code.name,
            "description": s.status.description,
            "start": s.start_time,
            "end": s.end_time,
        }
    """
)

_EPILOGUE = textwrap.dedent(
    """
    snapshot("end")
    print("@@CAPTURED@@" + json.dumps(
        {"spans": [_span(s) for s in _exporter.get_finished_spans()],
         "metrics": _SNAPSHOTS, "facts": FACTS},
        default=str,
    ))
    """
)


@dataclass
class Captured:
    """What a traced script recorded."""

    spans: list[dict[str, Any]]
    metrics: dict[str, dict[str, Any]]
    facts: dict[str, Any] = field(default_factory=dict)
    raw: str = ""

    def named(self, name: str, **attributes: Any) -> list[dict[str, Any]]:
        """The spans called `name` whose attributes include `attributes`."""
        return [
            s
            for s in self.spans
            if s["name"] == name and all(s["attributes"].get(k) == v for k, v in attributes.items())
        ]

    def one(self, name: str, **attributes: Any) -> dict[str, Any]:
        (span,) = self.named(name, **attributes)
        return span

    def children(self, parent: dict[str, Any], name: str | None = None) -> list[dict[str, Any]]:
        return [
            s
            for s in self.spans
            if s["parent_id"] == parent["span_id"] and (name is None or s["name"] == name)
        ]

    def points(self, metric: str, label: str = "end", **attributes: Any) -> list[dict[str, Any]]:
        """The data points of `metric` in snapshot `label` whose attributes include these."""
        found = self.metrics[label].get(metric, {"points": []})["points"]
        return [p for p in found if all(p["attributes"].get(k) == v for k, v in attributes.items())]

    def unit(self, metric: str, label: str = "end") -> str:
        unit: str = self.metrics[label][metric]["unit"]
        return unit


def run_traced(body: str, *, timeout: float = 120.0) -> Captured:
    """Run `body` (Python source; it may call `snapshot(label)` and fill `FACTS`) with the
    in-memory SDK installed, in a fresh interpreter; fails with its output if it fails."""
    script = _PRELUDE + textwrap.dedent(body) + _EPILOGUE
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout
    )
    marker = "@@CAPTURED@@"
    lines = [line for line in done.stdout.splitlines() if line.startswith(marker)]
    assert done.returncode == 0 and lines, done.stdout[-4000:] + done.stderr[-4000:]
    data = json.loads(lines[-1][len(marker) :])
    return Captured(data["spans"], data["metrics"], data["facts"], raw=lines[-1])
