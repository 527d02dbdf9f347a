"""Spans and metrics of runs: agent.run > agent.turn > gen_ai.chat / tool.execute, and links
from a delegated subagent's run to the tool span that started it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agent_runtime import Runtime, delegate
from agent_runtime.config import RuntimeConfig
from agent_runtime.messages import ToolCall
from agent_runtime.testing import ScriptedModel, ScriptedTurn
from agent_runtime.tools import tool

_exporter = InMemorySpanExporter()
_reader = InMemoryMetricReader()


@pytest.fixture(scope="module", autouse=True)
def sdk() -> Iterator[None]:
    # The global providers can be set once per process; later tests simply keep exporting.
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[_reader]))
    yield


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    _exporter.clear()
    yield _exporter


def by_name(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def test_a_delegating_run_nests_its_spans_and_the_subagent_links_back(
    spans: InMemorySpanExporter,
) -> None:
    ask = ToolCall(id="t1", name="delegate", arguments={"role": "helper", "task": "x"})
    with Runtime.start(RuntimeConfig()) as runtime:
        top = runtime.start_agent(
            ("s", "top", 0),
            model=ScriptedModel([ScriptedTurn(tool_calls=[ask]), "done"]),
            tools=[delegate(["helper"], model=ScriptedModel(["helped"]))],
        )
        top.run("go", timeout=5)
    finished = list(spans.get_finished_spans())
    runs = by_name(finished, "agent.run")
    top_run = next(s for s in runs if s.attributes["agent.role"] == "top")  # type: ignore[index]
    helper_run = next(s for s in runs if s.attributes["agent.role"] == "helper")  # type: ignore[index]
    turns = [
        s for s in by_name(finished, "agent.turn") if s.parent.span_id == top_run.context.span_id
    ]  # type: ignore[union-attr]
    assert len(turns) == 2
    chats = [
        s
        for s in by_name(finished, "gen_ai.chat")
        if s.parent.span_id in {t.context.span_id for t in turns}
    ]  # type: ignore[union-attr]
    assert len(chats) == 2 and all(c.attributes["gen_ai.usage.output_tokens"] > 0 for c in chats)  # type: ignore[index,operator]
    (tool_span,) = by_name(finished, "tool.execute")
    assert tool_span.parent.span_id == turns[0].context.span_id  # type: ignore[union-attr]
    assert tool_span.attributes["gen_ai.tool.name"] == "delegate"  # type: ignore[index]
    assert [link.context.span_id for link in helper_run.links] == [tool_span.context.span_id]
    assert top_run.attributes["agent.outcome"] == "completed"  # type: ignore[index]


def test_run_outcomes_and_tool_calls_are_counted() -> None:
    def total(name: str, **attrs: str) -> int:
        data = _reader.get_metrics_data()
        count = 0
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:  # type: ignore[union-attr]
                            if all(point.attributes.get(k) == v for k, v in attrs.items()):
                                count += int(point.value)  # type: ignore[union-attr]
        return count

    before = total("agent.runs", outcome="completed")
    with Runtime.start(RuntimeConfig()) as runtime:
        runtime.start_agent(("s", "a", 0), model=ScriptedModel(["x"])).run("go", timeout=5)
    assert total("agent.runs", outcome="completed") == before + 1
    assert total("agent.turns") >= 1


def test_tool_spans_carry_the_genai_tool_attributes(spans: InMemorySpanExporter) -> None:
    @tool
    def lookup(key: str) -> str:
        """Looks a key up."""
        return key

    @tool
    def broken() -> str:
        """Fails."""
        raise LookupError("gone")

    calls = [
        ToolCall(id="ok-1", name="lookup", arguments={"key": "k"}),
        ToolCall(id="bad-1", name="broken", arguments={}),
    ]
    with Runtime.start(RuntimeConfig()) as runtime:
        agent = runtime.start_agent(
            ("s", "tools", 0),
            model=ScriptedModel([ScriptedTurn(tool_calls=calls), "done"]),
            tools=[lookup, broken],
        )
        agent.run("go", timeout=5)
    tool_spans = {
        s.attributes["gen_ai.tool.call.id"]: s  # type: ignore[index]
        for s in by_name(list(spans.get_finished_spans()), "tool.execute")
    }
    assert set(tool_spans) == {"ok-1", "bad-1"}
    ok, bad = tool_spans["ok-1"], tool_spans["bad-1"]
    for span, name in ((ok, "lookup"), (bad, "broken")):
        attributes = dict(span.attributes or {})
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["gen_ai.tool.name"] == name
        assert "tool.name" not in attributes and "tool.call_id" not in attributes
    assert ok.status.status_code is StatusCode.UNSET and "error.type" not in (ok.attributes or {})
    assert bad.status.status_code is StatusCode.ERROR
    assert (bad.attributes or {})["error.type"] == "LookupError"
