"""Runtime.tree() and Runtime.stats(): the tree, each agent's status, the counters."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from agent_runtime import (
    AgentKey,
    AgentStatus,
    RunFailed,
    Runtime,
    RuntimeStats,
    RuntimeTree,
    TreeNode,
    delegate,
)
from agent_runtime.agent._status import ActorStatus, RunProgress, activity
from agent_runtime.llm import InvalidRequestError, RateLimitError
from agent_runtime.loop import RetryPolicy
from agent_runtime.messages import AssistantMessage, ToolCall
from agent_runtime.runtime import CHILD_IDS
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import Tool, tool
from supervisors import kill

KEY = AgentKey("s", "main", 0)


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    """Released at the end of the test at the latest, so no tool outlives it."""
    event = threading.Event()
    yield event
    event.set()


def call(call_id: str, name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def status_of(runtime: Runtime, key: AgentKey | tuple[str, str, int] = KEY) -> AgentStatus:
    status = runtime.tree().agent(key)
    assert status is not None, f"{key} is not in the tree"
    return status


def node(root: TreeNode, *path: str) -> TreeNode:
    for child_id in path:
        root = next(c for c in root.children if c.id == child_id)
    return root


def holding_tool(gate: threading.Event) -> Tool:
    @tool
    def hold() -> str:
        """Holds until the test lets go."""
        gate.wait(30)
        return "held"

    return hold


# -- the tree -------------------------------------------------------------------------------------


def test_the_tree_holds_the_root_children_in_order_and_the_agents_under_subagents(
    runtime: Runtime,
) -> None:
    runtime.start_agent(KEY, model=ScriptedModel(["a"]))
    runtime.start_agent(("s", "kept", 0), model=ScriptedModel(["b"]), restart="transient")
    tree = runtime.tree()
    root = tree.root
    assert (root.id, root.kind, root.strategy, root.alive) == (
        runtime.name,
        "supervisor",
        "one_for_one",
        True,
    )
    assert [c.id for c in root.children] == list(CHILD_IDS)
    subagents = node(root, "subagents")
    assert (subagents.kind, subagents.strategy) == ("supervisor", "one_for_one")
    temporary, transient = (
        node(subagents, "agent:s/main/0"),
        node(subagents, "agent:s/kept/0"),
    )
    assert (temporary.kind, temporary.agent, temporary.alive) == ("worker", KEY, True)
    assert (transient.kind, transient.strategy, transient.agent) == (
        "supervisor",
        "one_for_one",
        None,
    )
    assert [(c.id, c.kind, c.agent) for c in transient.children] == [
        ("agent", "worker", AgentKey("s", "kept", 0))
    ]
    assert [a.key for a in tree.agents] == [AgentKey("s", "kept", 0), KEY]


def test_the_tree_round_trips_through_json_and_is_frozen(runtime: Runtime) -> None:
    runtime.start_agent(KEY, model=ScriptedModel(["a"]))
    tree = runtime.tree()
    again = RuntimeTree.model_validate_json(tree.model_dump_json())
    assert again == tree
    assert again.agent(("s", "main", 0)) == tree.agent(KEY)
    with pytest.raises(ValidationError):
        tree.agents[0].status = "running"  # type: ignore[misc]
    stats = runtime.stats()
    assert RuntimeStats.model_validate_json(stats.model_dump_json()) == stats


def test_a_stopped_runtime_has_a_dead_root_and_no_agents(runtime: Runtime) -> None:
    runtime.start_agent(KEY, model=ScriptedModel(["a"]))
    runtime.stop()
    tree = runtime.tree()
    assert tree.root.alive is False and tree.agents == []
    assert not any(c.alive for c in tree.root.children)


def test_the_tree_answers_while_the_agents_actor_is_busy(
    runtime: Runtime, gate: threading.Event
) -> None:
    runtime.start_agent(KEY, model=ScriptedModel(["a"]))
    stuck = threading.Event()
    waited_out = threading.Event()

    def busy() -> None:  # holds the loop, so the agent's actor, inside a callback
        stuck.set()
        if not gate.wait(30):
            waited_out.set()

    runtime.loop_tasks.loop.call_soon_threadsafe(busy)
    assert stuck.wait(5)
    status = status_of(runtime)  # would wait for the actor if it asked it
    runtime.stats()
    gate.set()
    assert not waited_out.is_set()
    assert (status.status, status.activity) == ("idle", "idle")


# -- an agent's status ----------------------------------------------------------------------------


def test_a_run_in_a_tool_shows_running_its_turn_and_its_pending_call(
    runtime: Runtime, gate: threading.Event
) -> None:
    model = ScriptedModel([ScriptedTurn(tool_calls=[call("c1", "hold")]), "done"])
    agent = runtime.start_agent(KEY, model=model, tools=[holding_tool(gate)])
    assert (status_of(runtime).status, status_of(runtime).run_id) == ("idle", None)
    run_id = agent.prompt("go")
    wait_until(lambda: status_of(runtime).activity == "tool:hold", what="the tool runs")
    status = status_of(runtime)
    assert (status.status, status.run_id, status.turn) == ("running", run_id, 1)
    assert status.pending_tool_calls == 1
    gate.set()
    agent.wait_for_idle(timeout=5)
    wait_until(lambda: status_of(runtime).status == "idle")
    assert status_of(runtime) == AgentStatus(key=KEY, status="idle", activity="idle")


def test_a_streaming_answer_shows_streaming(runtime: Runtime) -> None:
    model = ScriptedModel([ScriptedTurn(chunks=["a"] * 200, chunk_delay=0.05)])
    agent = runtime.start_agent(KEY, model=model)
    agent.prompt("go")
    wait_until(lambda: status_of(runtime).activity == "streaming", what="the answer streams")
    agent.abort()
    agent.wait_for_idle(timeout=5)


def test_the_queues_show_their_lengths_while_a_run_holds_them(
    runtime: Runtime, gate: threading.Event
) -> None:
    model = ScriptedModel([ScriptedTurn(tool_calls=[call("c1", "hold")]), "a", "b", "c"])
    agent = runtime.start_agent(KEY, model=model, tools=[holding_tool(gate)])
    agent.prompt("go")
    wait_until(lambda: status_of(runtime).activity == "tool:hold")
    agent.steer("left")
    agent.follow_up("then this")
    agent.follow_up("and this")
    wait_until(lambda: status_of(runtime).follow_up_queue == 2)
    assert status_of(runtime).steering_queue == 1
    gate.set()
    agent.wait_for_idle(timeout=5)
    wait_until(lambda: status_of(runtime).status == "idle")
    assert (status_of(runtime).steering_queue, status_of(runtime).follow_up_queue) == (0, 0)


def test_a_delegated_subagent_names_its_parent_which_waits_on_it(
    runtime: Runtime, gate: threading.Event
) -> None:
    hold = holding_tool(gate)
    worker = ScriptedModel([ScriptedTurn(tool_calls=[call("h1", "hold")]), "found"])
    lead_model = ScriptedModel(
        [ScriptedTurn(tool_calls=[call("d1", "delegate", role="worker", task="t")]), "ok"]
    )
    lead = runtime.start_agent(
        ("s", "lead", 0), model=lead_model, tools=[delegate(model=worker, tools=[hold])]
    )
    lead.prompt("go")
    sub = ("s", "worker", 0)
    wait_until(lambda: runtime.tree().agent(sub) is not None, what="the subagent started")
    wait_until(lambda: status_of(runtime, sub).activity == "tool:hold")
    assert status_of(runtime, sub).parent == AgentKey("s", "lead", 0)
    assert status_of(runtime, ("s", "lead", 0)).activity == "waiting on subagent"
    assert status_of(runtime, ("s", "lead", 0)).parent is None
    gate.set()
    lead.wait_for_idle(timeout=10)


def test_a_failed_run_leaves_its_error_until_the_next_run(runtime: Runtime) -> None:
    model = ScriptedModel([ScriptedTurn(error=InvalidRequestError("bad request")), "fine"])
    agent = runtime.start_agent(KEY, model=model)
    with pytest.raises(RunFailed):
        agent.run("go", timeout=5)
    wait_until(lambda: status_of(runtime).error is not None)
    assert "bad request" in (status_of(runtime).error or "")
    agent.run("again", timeout=5)
    wait_until(lambda: status_of(runtime).error is None)


def test_subscriptions_show_their_depth_and_what_they_dropped(runtime: Runtime) -> None:
    agent = runtime.start_agent(KEY, model=ScriptedModel([ScriptedTurn(chunks=["x"] * 50)]))
    sub = agent.subscribe(max_queue=5, overflow="drop_newest")
    agent.run("go", timeout=5)
    wait_until(lambda: status_of(runtime).subscriptions != [])
    [shown] = status_of(runtime).subscriptions
    assert (shown.depth, shown.max_queue, shown.overflow) == (
        sub.stream.stats().queue_size,
        5,
        "drop_newest",
    )
    dropped = sub.stream.stats().dropped
    assert shown.dropped == dropped > 0
    assert runtime.stats().dropped_events == dropped
    sub.close()
    wait_until(lambda: status_of(runtime).subscriptions == [])
    assert runtime.stats().dropped_events == dropped  # counted once its subscription ended


@pytest.mark.parametrize(
    ("progress", "delegating", "expected"),
    [
        (None, False, "starting"),
        (RunProgress("other", 3, "streaming"), False, "starting"),
        (RunProgress("r1", 1, "waiting"), False, "waiting for model"),
        (RunProgress("r1", 1, "streaming"), False, "streaming"),
        (RunProgress("r1", 1, "retrying"), False, "retrying"),
        (RunProgress("r1", 2, "running", ("read", "read", "grep")), False, "tool:read,grep"),
        (RunProgress("r1", 2, "running", ("delegate",)), True, "waiting on subagent"),
    ],
)
def test_activity_says_what_a_running_agent_does(
    progress: RunProgress | None, delegating: bool, expected: str
) -> None:
    running = ActorStatus("r1", None, deque(), deque())
    assert activity(False, running, progress, delegating) == expected
    assert activity(True, running, progress, delegating) == "stopped"
    idle = ActorStatus(None, None, deque(), deque())
    assert activity(False, idle, progress, delegating) == "idle"


# -- the counters ---------------------------------------------------------------------------------


def test_stats_count_runs_turns_tool_calls_and_tokens(runtime: Runtime) -> None:
    @tool
    def fails() -> str:
        """Always fails."""
        raise ValueError("no")

    @tool
    def works() -> str:
        """Works."""
        return "yes"

    model = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[call("c1", "works"), call("c2", "fails")]),
            ScriptedTurn(tool_calls=[call("c3", "missing")]),
            "done",
            ScriptedTurn(error=InvalidRequestError("bad")),
        ]
    )
    agent = runtime.start_agent(KEY, model=model, tools=[works, fails])
    agent.run("one", timeout=5)
    with pytest.raises(RunFailed):
        agent.run("two", timeout=5)
    stats = runtime.stats()
    assert stats.runs == {"completed": 1, "failed": 1, "canceled": 0}
    assert stats.turns == 4
    assert (stats.tool_calls["ok"], stats.tool_calls["error"]) == (1, 1)
    assert stats.tool_calls["not_found"] == 1
    answers = [m for m in agent.state().messages if isinstance(m, AssistantMessage)]
    assert stats.input_tokens == sum(m.usage.input_tokens for m in answers) > 0
    assert stats.output_tokens >= sum(m.usage.output_tokens for m in answers) > 0


def test_stats_count_canceled_runs_and_retries(runtime: Runtime) -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(error=RateLimitError("slow down")),
            ScriptedTurn(chunks=["a"] * 100, chunk_delay=0.05),
        ]
    )
    retry = RetryPolicy(base_delay=0.0, max_delay=0.0, jitter=0.0)
    agent = runtime.start_agent(KEY, model=model, retry=retry)
    agent.prompt("go")
    wait_until(lambda: status_of(runtime).activity == "streaming")
    agent.abort()
    agent.wait_for_idle(timeout=5)
    stats = runtime.stats()
    assert stats.runs["canceled"] == 1 and stats.retries == 1


def test_a_transient_agents_restart_is_shown_and_counted(runtime: Runtime) -> None:
    agent = runtime.start_agent(KEY, model=ScriptedModel(["a"]), restart="transient")
    first = agent.ref
    kill(first, "test crash")
    wait_until(lambda: agent.alive and agent.ref is not first, what="the agent is restarted")
    wait_until(lambda: runtime.tree().agent(KEY) is not None)
    actor = node(runtime.tree().root, "subagents", "agent:s/main/0", "agent")
    assert (actor.restarts, actor.alive) == (1, True)
    assert runtime.stats().restarts == 1


def test_a_restarted_child_of_the_root_is_shown_and_counted(runtime: Runtime) -> None:
    [registry] = [c for c in runtime.supervisor.which_children() if c.id == "registry"]
    assert registry.ref is not None
    kill(registry.ref, "test crash")

    def restarted() -> bool:
        shown = node(runtime.tree().root, "registry")
        return shown.restarts == 1 and shown.alive

    wait_until(restarted, what="the registry's owner is restarted")
    assert runtime.stats().restarts == 1
