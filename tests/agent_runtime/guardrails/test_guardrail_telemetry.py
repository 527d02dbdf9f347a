"""What a guardrail failure records: a metric point and a span event (under the in-memory
OpenTelemetry SDK, in a subprocess), and the checked text in logs only with log_content."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
import structlog

from agent_runtime import Runtime
from agent_runtime.config import RuntimeConfig, TelemetryConfig
from agent_runtime.guardrails import RegexGuardrail
from agent_runtime.telemetry import configure_logging
from agent_runtime.testing import ScriptedModel
from tests.agent_runtime.otel_capture import run_traced


def test_a_reported_failure_is_counted_and_a_span_event_and_the_run_goes_on() -> None:
    captured = run_traced(
        """
        from agent_runtime import Runtime
        from agent_runtime.config import RuntimeConfig
        from agent_runtime.guardrails import RegexGuardrail
        from agent_runtime.messages import ToolCall
        from agent_runtime.testing import ScriptedModel, ScriptedTurn
        from agent_runtime.tools import tool

        @tool
        def search(query: str) -> str:
            '''Search.'''
            return "found"

        model = ScriptedModel([
            ScriptedTurn(tool_calls=[ToolCall(id="c1", name="search", arguments={"query": "x"})]),
            "done",
        ])
        guard = RegexGuardrail(keywords=["search"], at="tool_call", mode="report")
        with Runtime.start(RuntimeConfig()) as runtime:
            agent = runtime.start_agent(("s", "main", 0), model=model, tools=[search],
                                        guardrails=[guard])
            FACTS["text"] = agent.run("look it up", timeout=30).text
        """
    )
    assert captured.facts["text"] == "done"
    (point,) = captured.points(
        "agent.guardrail.failures", guardrail="RegexGuardrail", at="tool_call", mode="report"
    )
    assert point["value"] == 1
    events = [
        event
        for span in captured.named("agent.turn")
        for event in span["events"]
        if event["name"] == "agent.guardrail"
    ]
    (event,) = events
    assert event["attributes"]["at"] == "tool_call"
    assert event["attributes"]["explanation"] == "the text matches the keyword 'search'"
    tool_span = captured.one("execute_tool search")  # it ran
    assert tool_span["attributes"]["gen_ai.tool.name"] == "search"


@pytest.fixture
def log_stream() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    yield stream
    configure_logging(TelemetryConfig(), stream=io.StringIO(), force=True)  # log_content off
    structlog.reset_defaults()


@pytest.mark.parametrize("log_content", [False, True])
def test_the_checked_text_is_logged_only_with_log_content(
    log_stream: io.StringIO, log_content: bool
) -> None:
    config = TelemetryConfig.model_validate({"log_format": "json", "log_content": log_content})
    assert configure_logging(config, stream=log_stream, force=True)
    guard = RegexGuardrail(keywords=["zebra"], at="model_request", mode="report")
    with Runtime.start(RuntimeConfig(telemetry=config)) as runtime:
        agent = runtime.start_agent(
            ("s", "main", 0), model=ScriptedModel(["ok"]), guardrails=[guard]
        )
        agent.run("ZEBRAWORD zebra", timeout=10)
    lines = [json.loads(line) for line in log_stream.getvalue().splitlines() if line.strip()]
    (failed,) = [line for line in lines if line.get("event") == "guardrail.failed"]
    assert failed["mode"] == "report" and failed["role"] == "main"
    assert ("ZEBRAWORD" in log_stream.getvalue()) is log_content
    assert failed.get("text") == ("ZEBRAWORD zebra" if log_content else None)
