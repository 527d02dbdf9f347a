"""The runtime's metrics, read by the SDK's in-memory metric reader in a subprocess each
scenario (the global provider can be set once per process): observable gauges of live state,
histograms of model calls (GenAI conventions), runs, turns, tools and time to first token; and
what a run costs without an SDK."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
import structlog
from structlog.testing import capture_logs

from agent_runtime import Runtime, telemetry, tool
from agent_runtime.config import RuntimeConfig, TelemetryConfig
from agent_runtime.loop._instruments import LOOP_WAIT_SECONDS
from agent_runtime.loop._trace import RunTrace
from agent_runtime.messages import ToolCall
from agent_runtime.testing import ScriptedModel, ScriptedTurn
from tests.agent_runtime.otel_capture import Captured, run_traced

_BUSY = """
import threading
from agent_runtime import Runtime, tool
from agent_runtime.config import RuntimeConfig
from agent_runtime.messages import ToolCall
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until

started, release = threading.Event(), threading.Event()

@tool
def wait_here() -> str:
    \"\"\"Waits to be released.\"\"\"
    started.set()
    release.wait(30)
    return "released"

turns = [
    ScriptedTurn(tool_calls=[ToolCall(id="w1", name="wait_here")], delay=0.05),
    ScriptedTurn(text="all done now", chunks=["all ", "done ", "now"], delay=0.05),
]
with Runtime.start(RuntimeConfig(), name="observed") as runtime:
    agent = runtime.start_agent(("s", "worker", 0), model=ScriptedModel(turns), tools=[wait_here])
    small = agent.subscribe(max_queue=2, overflow="drop_newest")
    big = agent.subscribe(max_queue=1000, overflow="drop_oldest")
    agent.prompt("go")
    assert started.wait(30)

    def steady():
        # Events reach the subscriptions on the loop: collect once their counters stand still.
        before = [s.stream.stats() for s in (small, big)]
        snapshot("busy")
        after = [s.stream.stats() for s in (small, big)]
        FACTS["depths"] = [s.queue_size for s in after]
        FACTS["dropped"] = [s.dropped for s in after]
        return before == after

    wait_until(steady, timeout=30)
    release.set()
    agent.wait_for_idle(30)
    snapshot("idle")
snapshot("stopped")
"""

_OBSERVED_MODEL = """
from agent_runtime import Runtime
from agent_runtime.config import RuntimeConfig
from agent_runtime.llm import ObservableModel
from agent_runtime.testing import ScriptedModel

with Runtime.start(RuntimeConfig()) as runtime:
    agent = runtime.start_agent(("s", "a", 0), model=ObservableModel(ScriptedModel(["hi"])))
    agent.run("go", timeout=30)
"""

_BURST = """
import asyncio
from agent_runtime import Runtime
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.memory import MemoryPolicy
from agent_runtime.testing import ScriptedModel

async def main():
    async with Runtime.astart(RuntimeConfig(memory=MemoryConfig(store="memory"))) as runtime:
        agents = [
            await runtime.astart_agent((f"s{i}", "a", 0), model=ScriptedModel(["hi"]),
                                       memory=MemoryPolicy.none())
            for i in range(100)
        ]
        await asyncio.gather(*(agent.arun("go", timeout=30) for agent in agents))
        stats = runtime.stats()
        FACTS["waits"], FACTS["seconds"] = stats.loop_waits, stats.loop_wait_seconds

asyncio.run(main())
"""


@pytest.fixture(scope="module")
def busy() -> Captured:
    return run_traced(_BUSY)


def value(captured: Captured, metric: str, label: str, **attributes: str) -> float:
    (point,) = captured.points(metric, label, **{"agent_runtime.runtime": "observed"}, **attributes)
    number: float = point["value"]
    return number


def test_gauges_report_live_agents_active_runs_and_subscription_depth(busy: Captured) -> None:
    assert value(busy, "agent_runtime.agents.live", "busy") == 1
    assert value(busy, "agent_runtime.runs.active", "busy") == 1
    depths = busy.facts["depths"]
    depth = "agent_runtime.subscription.depth"
    assert value(busy, depth, "busy", aggregation="max") == max(depths) > 0
    assert value(busy, depth, "busy", aggregation="sum") == sum(depths)
    assert busy.unit(depth, "busy") == "{event}"


def test_the_dropped_gauge_sums_what_the_open_subscriptions_dropped(busy: Captured) -> None:
    dropped = value(busy, "agent_runtime.events.dropped", "busy")
    assert dropped == sum(busy.facts["dropped"]) > 0  # the small drop_newest one overflowed


def test_gauges_follow_the_runtime_to_idle_and_stop(busy: Captured) -> None:
    assert value(busy, "agent_runtime.runs.active", "idle") == 0
    assert value(busy, "agent_runtime.agents.live", "idle") == 1
    observed = {"agent_runtime.runtime": "observed"}
    assert busy.points("agent_runtime.agents.live", "stopped", **observed) == []


def test_model_calls_are_recorded_by_the_genai_histograms(busy: Captured) -> None:
    genai = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "scripted",
    }
    (duration,) = busy.points("gen_ai.client.operation.duration", **genai)
    assert duration["count"] == 2 and busy.unit("gen_ai.client.operation.duration") == "s"
    assert duration["explicit_bounds"] == list(telemetry.GEN_AI_SECONDS)
    for kind in ("input", "output"):
        usage = busy.points("gen_ai.client.token.usage", **genai, **{"gen_ai.token.type": kind})
        assert usage[0]["count"] == 2 and usage[0]["sum"] > 0
    assert busy.unit("gen_ai.client.token.usage") == "{token}"


def test_time_to_first_token_counts_from_the_request(busy: Captured) -> None:
    provider = {"gen_ai.provider.name": "scripted"}
    (ttft,) = busy.points("agent_runtime.time_to_first_token", **provider)
    assert ttft["count"] == 2
    assert ttft["sum"] >= 2 * 0.05  # each scripted answer waits 50 ms before its first chunk
    assert busy.unit("agent_runtime.time_to_first_token") == "s"


def test_runs_turns_and_tools_have_duration_histograms_in_seconds(busy: Captured) -> None:
    role = {"agent.role": "worker"}
    (run,) = busy.points("agent_runtime.run.duration", **role, outcome="completed")
    (turns,) = busy.points("agent_runtime.turn.duration", **role)
    (tool_point,) = busy.points(
        "agent_runtime.tool.duration", **{"gen_ai.tool.name": "wait_here"}, outcome="ok"
    )
    assert (run["count"], turns["count"], tool_point["count"]) == (1, 2, 1)
    assert run["sum"] >= tool_point["sum"] > 0
    for name in ("run", "turn", "tool"):
        assert busy.unit(f"agent_runtime.{name}.duration") == "s"
    (runs,) = busy.points("agent.runs", outcome="completed")
    assert runs["value"] == 1


def test_the_waits_of_runs_for_the_loop_are_a_histogram_the_stats_agree_with() -> None:
    captured = run_traced(_BURST)
    (wait,) = captured.points("agent_runtime.loop.wait")
    assert wait["count"] == captured.facts["waits"] > 0  # 100 runs at once: some waited
    assert wait["sum"] == pytest.approx(captured.facts["seconds"])
    assert wait["explicit_bounds"] == list(LOOP_WAIT_SECONDS)
    assert captured.unit("agent_runtime.loop.wait") == "s"


def test_an_observable_model_is_not_counted_twice() -> None:
    captured = run_traced(_OBSERVED_MODEL)
    (duration,) = captured.points("gen_ai.client.operation.duration")
    assert duration["count"] == 1


# -- without an SDK (this process installs none) ---------------------------------------------


@pytest.fixture
def logs_at(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """structlog at `request.param`'s level for the test; the suite's configuration after."""
    configured, saved = structlog.is_configured(), structlog.get_config()
    for name in ("_configured_by_us", "_log_content"):
        monkeypatch.setattr(telemetry, name, getattr(telemetry, name))
    telemetry.configure_logging(
        TelemetryConfig(log_level=request.param), stream=io.StringIO(), force=True
    )
    try:
        yield
    finally:
        structlog.reset_defaults()
        if configured:
            structlog.configure(**saved)


@pytest.mark.parametrize("logs_at", ["info"], indirect=True)
@pytest.mark.usefixtures("logs_at")
def test_without_an_sdk_or_debug_logs_a_run_records_nothing() -> None:
    assert not telemetry.telemetry_enabled()
    assert RunTrace(None, "r", "m", "p", []).enabled is False


@pytest.mark.parametrize("logs_at", ["debug"], indirect=True)
@pytest.mark.usefixtures("logs_at")
def test_introspection_events_are_debug_lines_without_content() -> None:
    @tool
    def lookup(query: str) -> str:
        """Look a thing up."""
        return "secret-result"

    call = ToolCall(id="c1", name="lookup", arguments={"query": "secret-argument"})
    model = ScriptedModel([ScriptedTurn(tool_calls=[call]), "secret-answer"])
    with Runtime.start(RuntimeConfig(), configure_logging=False) as runtime, capture_logs() as logs:
        agent = runtime.start_agent(("s", "a", 0), model=model, tools=[lookup])
        agent.run("secret-prompt", timeout=30)
    names = ("agent.loop.started", "agent.turn.observed", "tool.use.observed", "agent.loop.ended")
    lines = [line for line in logs if line["event"] in names]
    assert [line["event"] for line in lines] == [
        "agent.loop.started",
        "tool.use.observed",
        "agent.turn.observed",
        "agent.turn.observed",
        "agent.loop.ended",
    ]
    assert all(line["log_level"] == "debug" and line["role"] == "a" for line in lines)
    assert lines[1]["gen_ai.tool.name"] == "lookup" and lines[-1]["outcome"] == "completed"
    assert "secret" not in json.dumps(lines, default=str)
