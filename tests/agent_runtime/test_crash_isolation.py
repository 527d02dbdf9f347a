"""A crash-looping agent ends alone: its restart budget is its own, and every other agent of the
runtime, mid-run or idle, goes on."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import structlog

from agent_runtime import Agent, AgentStopped, Runtime
from agent_runtime.events import Error
from agent_runtime.messages import ToolCall
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import ToolContext, tool
from supervisors import kill


@pytest.fixture
def runtime(make_runtime: Callable[..., Runtime]) -> Runtime:
    # A window no slow machine outlasts: every crash of a test counts against the budgets.
    return make_runtime(supervision={"max_restarts": 3, "max_seconds": 120})


def crash_mid_run(agent: Agent) -> None:
    """Start a run of `agent`, crash its actor while the answer streams, and wait until the
    supervisor has replaced it (or the agent ended for good)."""
    run_id = agent.prompt("go")
    wait_until(lambda: agent.state().stream_message is not None, what="the answer streaming")
    ref = agent.ref
    with agent.subscribe() as sub:
        kill(ref, "crash loop")
        end = list(sub.until_end(timeout=10, run_id=run_id))[-1]
    assert isinstance(end, Error) and end.reason.startswith("agent_crashed: ")
    try:
        agent.state()  # answered by the next incarnation, once it runs
    except AgentStopped:
        return  # that was one crash too many: the agent ended
    wait_until(lambda: agent.alive and agent.ref is not ref, what="the restarted incarnation")


def test_two_crash_looping_transient_agents_end_alone_and_a_busy_sibling_finishes(
    runtime: Runtime,
) -> None:
    max_restarts = runtime.config.supervision.max_restarts
    gate = threading.Event()

    @tool
    def hold(ctx: ToolContext) -> str:
        """Waits for the test."""
        gate.wait(30)
        return "held"

    sibling = runtime.start_agent(
        ("s", "sibling", 0),
        model=ScriptedModel(
            [ScriptedTurn(tool_calls=[ToolCall(id="h1", name="hold", arguments={})]), "finished"]
        ),
        tools=[hold],
    )
    sibling.prompt("work")
    wait_until(lambda: sibling.state().pending_tool_calls == ["h1"], what="the sibling's tool")
    slow = ScriptedTurn(chunks=["never", " ends"], chunk_delay=60.0)
    flaky = [
        runtime.start_agent(
            ("s", f"flaky{i}", 0), model=ScriptedModel([slow] * 10), restart="transient"
        )
        for i in range(2)
    ]

    with structlog.testing.capture_logs() as logs:
        for _ in range(max_restarts + 1):  # one crash past each agent's own budget
            for agent in flaky:
                crash_mid_run(agent)
    gave_up = [e for e in logs if e["event"] == "agent.gave_up"]
    assert sorted(e["role"] for e in gave_up) == ["flaky0", "flaky1"]

    for agent in flaky:
        assert not agent.alive and runtime.registry.lookup(agent.key) is None
        with pytest.raises(AgentStopped):
            agent.state()
    assert sibling.state().is_running  # mid-run all along
    gate.set()
    sibling.wait_for_idle(timeout=10)
    state = sibling.state()
    assert state.error is None and state.messages[-1].text == "finished"
    assert runtime.alive and runtime.subagents_supervisor.alive
    assert all(child.alive for child in runtime.supervisor.which_children())
    newcomer = runtime.start_agent(("s", "newcomer", 0), model=ScriptedModel(["hello"]))
    assert newcomer.run("hi", timeout=10).text == "hello"


def test_a_crash_looping_agents_runs_fail_and_do_not_touch_the_session_of_others(
    runtime: Runtime,
) -> None:
    flaky = runtime.start_agent(
        ("s", "flaky", 0),
        model=ScriptedModel([ScriptedTurn(chunks=["a", "b"], chunk_delay=60.0)] * 10),
        restart="transient",
    )
    steady = runtime.start_agent(("t", "steady", 0), model=ScriptedModel(["one", "two"]))
    assert steady.run("first", timeout=10).text == "one"
    for _ in range(runtime.config.supervision.max_restarts + 1):
        crash_mid_run(flaky)
    with pytest.raises(AgentStopped):
        flaky.prompt("again")
    assert steady.run("second", timeout=10).text == "two"
    assert [m.role for m in steady.state().messages] == ["user", "assistant"] * 2
    with pytest.raises(AgentStopped):
        flaky.run("once more", timeout=5)
