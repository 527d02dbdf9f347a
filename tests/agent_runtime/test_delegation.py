"""Subagents from tools: ToolContext.spawn, the delegate tool, nested events, abort from the top."""

from __future__ import annotations

import threading

import pytest

from agent_runtime import Agent, AgentKey, AgentStopped, Runtime, delegate
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.events import AgentEnd, Canceled, Event, MessageUpdate
from agent_runtime.loop import validate_transcript
from agent_runtime.messages import ToolCall, ToolResultMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import ToolContext, tool
from supervisors import kill


def ask(call_id: str, role: str, task: str) -> ScriptedTurn:
    return ScriptedTurn(
        tool_calls=[ToolCall(id=call_id, name="delegate", arguments={"role": role, "task": task})]
    )


def chain(
    leaf_turns: list[ScriptedTurn | str],
) -> tuple[ScriptedModel, ScriptedModel, ScriptedModel]:
    leaf = ScriptedModel(leaf_turns)
    mid = ScriptedModel([ask("m1", "leaf", "dig deeper"), "mid done"])
    top = ScriptedModel([ask("t1", "mid", "investigate"), "top done"])
    return top, mid, leaf


def start_chain(
    runtime: Runtime, leaf_turns: list[ScriptedTurn | str]
) -> tuple[Agent, ScriptedModel]:
    top_model, mid_model, leaf_model = chain(leaf_turns)
    leaf_tool = delegate(["leaf"], model=leaf_model)
    mid_tool = delegate(["mid"], model=mid_model, tools=[leaf_tool])
    top = runtime.start_agent(("s", "top", 0), model=top_model, tools=[mid_tool])
    return top, leaf_model


def test_spawn_uses_the_parents_session_and_the_next_free_index(runtime: Runtime) -> None:
    spawned: list[AgentKey] = []

    @tool
    def make(ctx: ToolContext) -> str:
        """Spawns two helpers."""
        for _ in range(2):
            spawned.append(ctx.spawn("helper", model=ScriptedModel([])).key)
        return "ok"

    model = ScriptedModel([ScriptedTurn(tool_calls=[ToolCall(id="c", name="make")]), "done"])
    parent = runtime.start_agent(("s9", "main", 0), model=model, tools=[make])
    parent.run("go", timeout=5)
    assert spawned == [AgentKey("s9", "helper", 0), AgentKey("s9", "helper", 1)]
    parent.stop()
    wait_until(lambda: runtime.registry.count_by_session("s9") == 0)


def test_a_tool_of_a_stopped_agent_cannot_spawn_a_subagent(runtime: Runtime) -> None:
    # Its subagent would be nobody's: stopped with no parent, never reused, never stopped.
    release = threading.Event()
    outcome: list[BaseException | AgentKey] = []

    @tool
    def late(ctx: ToolContext) -> str:
        """Spawns once released (after its agent was stopped)."""
        release.wait(10)
        try:
            outcome.append(ctx.spawn("helper", model=ScriptedModel([])).key)
        except Exception as exc:
            outcome.append(exc)
        return "ok"

    model = ScriptedModel([ScriptedTurn(tool_calls=[ToolCall(id="c", name="late")])])
    parent = runtime.start_agent(("s8", "main", 0), model=model, tools=[late])
    with parent.subscribe() as sub:
        parent.prompt("go")
        for event in sub.until_end(timeout=10):
            if event.type == "tool_execution_start":
                break
        parent.stop()
    release.set()
    wait_until(lambda: bool(outcome), what="the tool tried to spawn")
    assert isinstance(outcome[0], AgentStopped), outcome
    assert "('s8', 'main', 0)" in str(outcome[0])
    assert runtime.registry.count_by_session("s8") == 0


def test_a_two_level_delegate_chain_streams_nested_events_to_the_top_subscriber(
    runtime: Runtime,
) -> None:
    top, _ = start_chain(runtime, [ScriptedTurn(chunks=["leaf ", "done"])])
    events = list(top.stream("start"))
    assert isinstance(events[-1], AgentEnd) and events[-1].agent == top.key
    keys = {e.agent for e in events}
    assert {AgentKey("s", "top", 0), AgentKey("s", "mid", 0), AgentKey("s", "leaf", 0)} <= keys
    leaf_deltas = [
        e.delta.delta
        for e in events
        if isinstance(e, MessageUpdate) and e.agent == ("s", "leaf", 0)
    ]
    assert leaf_deltas == ["leaf ", "done"]
    result = next(m for m in top.state().messages if isinstance(m, ToolResultMessage))
    assert result.text == "mid done"
    mid = runtime.registry.lookup(("s", "mid", 0))
    mid_results = [m for m in mid.state().messages if isinstance(m, ToolResultMessage)]
    assert mid_results[0].text == "leaf done"


def test_an_idle_subagent_of_the_role_is_reused(runtime: Runtime) -> None:
    worker_model = ScriptedModel(["first answer", "second answer"])
    tool_ = delegate(["worker"], model=worker_model)
    top_model = ScriptedModel([ask("a", "worker", "one"), ask("b", "worker", "two"), "done"])
    top = runtime.start_agent(("s", "top", 0), model=top_model, tools=[tool_])
    top.run("go", timeout=10)
    assert runtime.registry.count_by_session("s") == 2
    results = [m.text for m in top.state().messages if isinstance(m, ToolResultMessage)]
    assert results == ["first answer", "second answer"]


def test_aborting_the_top_aborts_the_whole_chain_cleanly(runtime: Runtime) -> None:
    top, leaf_model = start_chain(runtime, [ScriptedTurn(chunks=["a", "b"], chunk_delay=30.0)])
    sub = top.subscribe()
    top.prompt("start")
    seen: list[Event] = []
    for event in sub:
        seen.append(event)
        if isinstance(event, MessageUpdate) and event.agent == ("s", "leaf", 0):
            break
    top.abort("user_abort")
    rest = list(sub.until_end(timeout=5, run_id=None))
    sub.close()
    top.wait_for_idle(timeout=5)
    canceled = {e.agent for e in seen + rest if isinstance(e, Canceled)}
    assert AgentKey("s", "top", 0) in canceled
    for key in [("s", "mid", 0), ("s", "leaf", 0)]:
        agent = runtime.registry.lookup(key)
        agent.wait_for_idle(timeout=5)
        assert not validate_transcript(agent.state().messages)
    assert not validate_transcript(top.state().messages)
    assert leaf_model.call_count == 1


def test_the_delegate_tool_refuses_an_unknown_role(runtime: Runtime) -> None:
    tool_ = delegate(["research"], model=ScriptedModel([]))
    top = runtime.start_agent(
        ("s", "top", 0), model=ScriptedModel([ask("x", "hacker", "t"), "ok"]), tools=[tool_]
    )
    top.run("go", timeout=5)
    (result,) = [m for m in top.state().messages if isinstance(m, ToolResultMessage)]
    assert result.is_error and "research" in result.text
    assert runtime.registry.count() == 1


def test_stopping_the_parent_stops_its_spawned_subagents(runtime: Runtime) -> None:
    worker_model = ScriptedModel(["done"])
    top = runtime.start_agent(
        ("s", "top", 0),
        model=ScriptedModel([ask("a", "worker", "t"), "ok"]),
        tools=[delegate(model=worker_model)],
    )
    top.run("go", timeout=5)
    worker = runtime.registry.lookup(("s", "worker", 0))
    assert worker is not None and worker.alive
    top.stop()
    wait_until(lambda: not worker.alive)
    assert runtime.registry.count() == 0


def test_a_system_prompt_sent_with_steering_applies_to_the_next_model_call(
    runtime: Runtime,
) -> None:
    gate_model = ScriptedModel([ScriptedTurn(chunks=["a", "b"], chunk_delay=0.2), "second"])
    agent = runtime.start_agent(("s", "main", 0), model=gate_model, system_prompt="old")
    agent.prompt("go")
    wait_until(lambda: gate_model.call_count == 1)
    agent.steer("change", system_prompt="new")
    agent.wait_for_idle(timeout=5)
    assert [r.system for r in gate_model.requests] == ["old", "new"]


def test_a_crashed_subagent_never_touches_its_parent_or_siblings(runtime: Runtime) -> None:
    worker_model = ScriptedModel([ScriptedTurn(chunks=["a", "b"], chunk_delay=30.0)])
    top = runtime.start_agent(
        ("s", "top", 0),
        model=ScriptedModel([ask("d", "worker", "t"), "recovered"]),
        tools=[delegate(model=worker_model)],
    )
    sibling = runtime.start_agent(("s", "sibling", 0), model=ScriptedModel(["fine"]))
    top.prompt("go")
    wait_until(lambda: worker_model.call_count == 1)
    worker = runtime.registry.lookup(("s", "worker", 0))
    kill(worker.ref)
    top.wait_for_idle(timeout=5)
    (result,) = [m for m in top.state().messages if isinstance(m, ToolResultMessage)]
    assert result.is_error and "agent_crashed: killed" in result.text
    assert top.alive and top.state().messages[-1].text == "recovered"  # type: ignore[union-attr]
    assert not worker.alive and runtime.registry.lookup(("s", "worker", 0)) is None
    assert sibling.run("hi", timeout=5).text == "fine"


# -- the tool's schema ----------------------------------------------------------------------------


def test_the_allowed_roles_are_a_json_schema_enum() -> None:
    role = delegate(["research", "writer"]).spec().parameters["properties"]["role"]
    assert role["type"] == "string" and role["enum"] == ["research", "writer"]


def test_any_role_is_a_plain_string() -> None:
    role = delegate().spec().parameters["properties"]["role"]
    assert role["type"] == "string" and "enum" not in role


@pytest.mark.parametrize(
    ("roles", "named"),
    [([], "at least one role"), ("research", "not the string"), (["a", ""], "non-empty")],
)
def test_bad_roles_are_rejected_when_the_tool_is_made(roles: object, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        delegate(roles)  # type: ignore[arg-type]


def test_aborting_a_parent_whose_subagent_ended_aborts_the_others_and_says_so() -> None:
    with Runtime.start(RuntimeConfig(memory=MemoryConfig(store="memory"))) as runtime:
        hung = [ScriptedTurn(chunks=["a", "b"], chunk_delay=60.0)]
        parent = runtime.start_agent(("s", "lead", 0), model=ScriptedModel(hung))
        gone = runtime.spawn_subagent(parent, "gone", {"model": ScriptedModel()})
        child = runtime.spawn_subagent(parent, "busy", {"model": ScriptedModel(list(hung))})
        gone.stop()
        parent.prompt("go")
        child.prompt("go")
        wait_until(lambda: child.state().stream_message is not None)
        assert parent.abort("operator") is True  # no AgentStopped for the child that ended
        child.wait_for_idle(10)
        assert child.state().error is None
        assert not child.state().is_running


def test_until_end_with_a_delegates_run_id_stops_at_that_runs_end(runtime: Runtime) -> None:
    leaf = ScriptedModel([ScriptedTurn(chunks=["a ", "b"])])
    parent_model = ScriptedModel([ask("d", "leaf", "t"), ScriptedTurn(text="ok", delay=0.5)])
    parent = runtime.start_agent(("s", "top", 0), model=parent_model, tools=[delegate(model=leaf)])
    sub = parent.subscribe()
    parent.prompt("go")
    first = next(e for e in sub.until_end(timeout=10) if e.agent.role == "leaf")
    read = list(sub.until_end(timeout=10, run_id=first.run_id))
    assert isinstance(read[-1], AgentEnd) and read[-1].run_id == first.run_id
    assert all(e.agent.role == "leaf" for e in read)  # the parent's end not read: it is later


def test_a_parent_that_crashed_for_good_takes_its_subagents_with_it(runtime: Runtime) -> None:
    worker_model = ScriptedModel([ScriptedTurn(text="never", delay=60)])
    top = runtime.start_agent(
        ("s", "top", 0),
        model=ScriptedModel([ask("a", "worker", "t"), "ok"]),
        tools=[delegate(model=worker_model)],
    )  # temporary: a crash ends it
    top.prompt("go")
    wait_until(lambda: worker_model.call_count == 1)
    worker = runtime.registry.lookup(("s", "worker", 0))
    assert worker is not None
    kill(top.ref, "test crash")
    wait_until(lambda: not top.alive)
    wait_until(lambda: not worker.alive, what="the subagent stopped with its parent")
    assert runtime.registry.count() == 0


def test_a_runtime_stop_ends_delegated_runs_as_stopping_not_as_parent_aborted() -> None:
    reasons: list[str] = []
    for _ in range(10):
        with Runtime.start(RuntimeConfig(memory=MemoryConfig(store="memory"))) as runtime:
            subs = []
            for i in range(4):
                worker = ScriptedModel([ScriptedTurn(chunks=["w "] * 200, chunk_delay=0.005)])
                parent = runtime.start_agent(
                    (f"s{i}", "top", 0),
                    model=ScriptedModel([ask("a", "worker", "t"), "ok"]),
                    tools=[delegate(model=worker)],
                )
                subs.append(parent.subscribe(max_queue=100_000))
                parent.prompt("go")
            wait_until(lambda: runtime.registry.count() == 8)
            runtime.stop()
        for sub in subs:
            reasons += [e.reason for e in sub if isinstance(e, Canceled)]
    assert len(reasons) == 10 * 8  # each parent's and each subagent's run, seen by the parent
    assert set(reasons) == {"runtime_stopping"}
