"""The agent as a real actor: crashes mean something, restarts restore, state has one owner."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import Any

import pytest
import structlog

from agent_runtime import (
    AgentBusy,
    AgentStopped,
    ConfigError,
    RunFailed,
    Runtime,
)
from agent_runtime.agent import AgentOptions, _actor
from agent_runtime.agent._history import repaired
from agent_runtime.agent._run import AgentRun
from agent_runtime.config import RuntimeConfig
from agent_runtime.events import AgentEnd, Error, Event, MessageUpdate, ToolExecutionStart
from agent_runtime.llm import ProviderError
from agent_runtime.loop import RetryPolicy, validate_transcript
from agent_runtime.memory import InMemoryStore, MemoryAdded, MemoryPolicy, SessionMemory
from agent_runtime.messages import (
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import Tool, ToolContext, ToolRegistry, tool
from supervisors import exit_reason, kill

NO_RETRY = RetryPolicy(max_retries=0)


def call(call_id: str, name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


def texts(messages: Iterable[Message]) -> list[str]:
    return [m.text for m in messages]  # type: ignore[union-attr]


# -- crashes ------------------------------------------------------------------------------------


class BrokenRegistry(ToolRegistry):
    def all(self) -> list[Tool]:
        raise RuntimeError("registry broke")


def test_an_exception_in_a_handler_crashes_the_actor_and_ends_a_temporary_agent(
    runtime: Runtime,
) -> None:
    agent = runtime.start_agent(
        ("s", "main", 0), model=ScriptedModel(["x"]), tool_registry=BrokenRegistry()
    )
    ref = agent.ref
    sub = agent.subscribe()
    with pytest.raises(RuntimeError, match="registry broke"):
        agent.run("go")  # a bug in the start: raised to the caller, and the actor crashes
    wait_until(lambda: not ref.is_alive())
    reason = exit_reason(ref)
    assert reason is not None and reason.kind == "crash" and "registry broke" in reason.detail
    wait_until(lambda: runtime.registry.lookup(("s", "main", 0)) is None)
    assert not agent.alive
    with pytest.raises(AgentStopped):
        agent.state()
    assert list(sub) == []  # closed with the agent: no run had started


def slow_tool_agent(runtime: Runtime, key: tuple[str, str, int], **options: Any) -> Any:
    gate = threading.Event()

    @tool
    def wait_here(ctx: ToolContext) -> str:
        """Waits for the gate or the abort."""
        while not gate.wait(0.01) and not ctx.signal.aborted:
            pass
        return "done"

    model = ScriptedModel([ScriptedTurn(tool_calls=[call("w", "wait_here")]), "after"] * 3)
    return runtime.start_agent(key, model=model, tools=[wait_here], **options), gate


def test_a_crash_while_applying_a_runs_events_ends_that_run_with_agent_crashed(
    runtime: Runtime,
) -> None:
    @tool
    def crash_my_agent(ctx: ToolContext) -> str:
        """Kills the actor of the agent that called it, mid-run."""
        kill(ctx.runtime.registry.lookup(ctx.agent_key).ref, "crash: RuntimeError: injected fault")
        return "never seen"

    model = ScriptedModel([ScriptedTurn(tool_calls=[call("w", "crash_my_agent")]), "after"])
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[crash_my_agent])
    sub = agent.subscribe()
    with pytest.raises(RunFailed) as failed:
        agent.run("go", timeout=5)
    assert failed.value.reason.startswith("agent_crashed: ")
    assert "injected fault" in failed.value.reason
    events = list(sub)  # the temporary agent is gone, so its subscription ends
    assert isinstance(events[-1], Error) and events[-1].reason == failed.value.reason
    assert runtime.registry.lookup(("s", "main", 0)) is None


def test_a_transient_agent_comes_back_with_its_history_and_its_subscriptions(
    runtime: Runtime,
) -> None:
    streaming = ScriptedTurn(chunks=["par", "tial"], chunk_delay=30.0)
    model = ScriptedModel(
        ["first", ScriptedTurn(tool_calls=[call("e", "echo", text="hi")]), streaming, "again"]
    )
    agent = runtime.start_agent(
        ("s", "main", 0), model=model, tools=[echo], restart="transient", system_prompt="old"
    )
    agent.run("hello", timeout=5)
    agent.set_system_prompt("kept")
    sub = agent.subscribe()
    run_id = agent.prompt("next")
    wait_until(lambda: model.call_count == 3)  # the tool turn is committed, the answer streams
    old_ref = agent.ref
    kill(old_ref)
    ended = list(sub.until_end(timeout=5, run_id=run_id))
    assert isinstance(ended[-1], Error) and ended[-1].reason.startswith("agent_crashed: killed")
    wait_until(lambda: agent.alive and agent.ref is not old_ref)
    assert runtime.registry.lookup(("s", "main", 0)) is agent
    state = agent.state()
    assert state.system_prompt == "kept"
    assert texts(state.messages) == ["hello", "first", "next", "", "hi"]
    assert not validate_transcript(state.messages)
    next_run = agent.continue_run()  # the history ends with a tool result: it continues at once
    events = list(sub.until_end(timeout=5, run_id=next_run))
    assert isinstance(events[-1], AgentEnd) and events[-1].new_messages[-1].text == "again"  # type: ignore[union-attr]


def test_a_restarted_agent_answers_calls_left_unpaired_with_outcome_unknown() -> None:
    memory = SessionMemory(InMemoryStore())
    dangling = AssistantMessage(content=[call("c1", "echo", text="x")], stop_reason="tool_use")
    memory.append("s", [UserMessage(content="go"), dangling])
    with Runtime.start(RuntimeConfig()) as rt:
        rt.memory, rt.memory_writer.memory = memory, memory
        agent = rt.start_agent(("s", "main", 0), model=ScriptedModel(["resumed"]))
        (result,) = [m for m in agent.state().messages if isinstance(m, ToolResultMessage)]
        assert result.tool_call_id == "c1" and result.details["outcome"] == "unknown"
        agent.continue_run()
        agent.wait_for_idle(timeout=5)
        assert agent.state().messages[-1].text == "resumed"  # type: ignore[union-attr]


def test_repaired_inserts_unknown_results_right_after_their_turn() -> None:
    turn = AssistantMessage(content=[call("a", "echo"), call("b", "echo")], stop_reason="tool_use")
    answered = ToolResultMessage(
        tool_call_id="a", tool_name="echo", content=[TextContent(text="ok")]
    )
    later = UserMessage(content="later")
    fixed = repaired([UserMessage(content="go"), turn, answered, later], "agent_restarted")
    assert [getattr(m, "tool_call_id", None) for m in fixed] == [None, None, "a", "b", None]
    assert not validate_transcript(fixed)


def test_the_fourth_crash_within_max_seconds_ends_that_agent_alone(runtime: Runtime) -> None:
    flaky = runtime.start_agent(
        ("s", "flaky", 0), model=ScriptedModel(["x"] * 10), restart="transient"
    )
    sibling = runtime.start_agent(("s", "sibling", 0), model=ScriptedModel(["fine"]))
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            ref = flaky.ref
            kill(ref)
            wait_until(lambda ref=ref: flaky.alive and flaky.ref is not ref, what="a restart")  # type: ignore[misc]
        kill(flaky.ref)
        wait_until(lambda: any(e["event"] == "agent.gave_up" for e in logs), what="give-up")
    with pytest.raises(AgentStopped):
        flaky.state()
    assert not flaky.alive and runtime.registry.lookup(("s", "flaky", 0)) is None
    assert sibling.run("hi", timeout=5).text == "fine"
    assert runtime.alive and runtime.subagents_supervisor.alive


# -- one owner ----------------------------------------------------------------------------------


def test_calls_from_many_threads_are_each_applied_once_in_order(runtime: Runtime) -> None:
    # The state has one owner: calls from four threads at once, while a run goes on, are
    # each applied exactly once and in each caller's order (nothing lost, nothing twice).
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[call(f"e{i}", "echo", text=str(i))]) for i in range(20)]
        + ["done"] * 100
    )
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[echo])
    agent.prompt("go")

    def poke(n: int) -> None:
        for i in range(10):
            agent.state()
            agent.steer(f"steer {n}.{i}")
            agent.follow_up(f"follow {n}.{i}")
            agent.set_system_prompt(f"prompt {n}.{i}")

    threads = [threading.Thread(target=poke, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    agent.wait_for_idle(timeout=30)
    state = agent.state()
    users = [m.text for m in state.messages if isinstance(m, UserMessage)]
    queued = texts(state.steering_queue) + texts(state.follow_up_queue)
    for kind in ("steer", "follow"):
        for n in range(4):
            sent = [f"{kind} {n}.{i}" for i in range(10)]
            seen = [t for t in users + queued if t in sent]
            assert seen == sent  # each once, in the caller's order
    assert state.system_prompt.startswith("prompt ")


# -- the semantic fixes -------------------------------------------------------------------------


def test_a_system_prompt_travels_with_its_message(runtime: Runtime) -> None:
    model = ScriptedModel([ScriptedTurn(chunks=["a", "b"], chunk_delay=0.2), "second", "third"])
    agent = runtime.start_agent(("s", "main", 0), model=model, system_prompt="own")
    agent.prompt("go")
    wait_until(lambda: model.call_count == 1)
    agent.steer("steered", system_prompt="A")
    agent.follow_up("followed", system_prompt="B")
    agent.wait_for_idle(timeout=5)
    assert [r.system for r in model.requests] == ["own", "A", "B"]
    assert agent.state().system_prompt == "own"


def test_a_follow_up_to_an_idle_agent_only_queues(runtime: Runtime) -> None:
    model = ScriptedModel(["one", "two", "three"])
    agent = runtime.start_agent(("s", "main", 0), model=model)
    agent.run("go", timeout=5)
    agent.follow_up("later")
    state = agent.state()
    assert not state.is_running and texts(state.follow_up_queue) == ["later"]
    assert model.call_count == 1
    agent.run("now", timeout=5)  # the next run takes it when it would stop
    assert texts(agent.state().messages) == ["go", "one", "now", "two", "later", "three"]


def test_a_follow_up_after_a_failed_run_starts_nothing_and_keeps_the_error(
    runtime: Runtime,
) -> None:
    model = ScriptedModel([ScriptedTurn(error=ProviderError("down")), "never"])
    agent = runtime.start_agent(("s", "main", 0), model=model, retry=NO_RETRY)
    with pytest.raises(RunFailed):
        agent.run("go", timeout=5)
    agent.follow_up("again")
    state = agent.state()
    assert state.error is not None and "down" in state.error
    assert not state.is_running and texts(state.follow_up_queue) == ["again"]
    assert model.call_count == 1


def test_a_follow_up_after_an_aborted_run_starts_nothing(runtime: Runtime) -> None:
    model = ScriptedModel([ScriptedTurn(chunks=["a", "b"], chunk_delay=30.0), "never"])
    agent = runtime.start_agent(("s", "main", 0), model=model)
    sub = agent.subscribe()
    agent.prompt("go")
    wait_until(lambda: model.call_count == 1)
    agent.abort()
    list(sub.until_end(timeout=5))
    agent.wait_for_idle(timeout=5)
    agent.follow_up("again")
    state = agent.state()
    assert not state.is_running and texts(state.follow_up_queue) == ["again"]
    assert model.call_count == 1


@pytest.mark.parametrize("overflow", ["drop_oldest", "drop_newest"])
def test_a_dropping_subscription_never_loses_a_runs_end(runtime: Runtime, overflow: Any) -> None:
    model = ScriptedModel([ScriptedTurn(chunks=[f"{i} " for i in range(50)])])
    agent = runtime.start_agent(("s", "main", 0), model=model)
    sub = agent.subscribe(max_queue=2, overflow=overflow)
    agent.run("go", timeout=5)  # nobody reads meanwhile
    events = list(sub.until_end(timeout=5))
    assert isinstance(events[-1], AgentEnd)


def test_once_run_returns_the_agent_takes_the_next_prompt(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["ok"] * 200))
    for i in range(200):
        try:
            agent.run(f"q{i}", timeout=5)
        except AgentBusy:  # pragma: no cover - the defect this test guards against
            pytest.fail(f"run {i}: AgentBusy right after the previous run() returned")


# -- options ------------------------------------------------------------------------------------


def test_start_agent_without_a_model_says_how_to_give_one(runtime: Runtime) -> None:
    with pytest.raises(TypeError, match=r"model=.*default_profile"):
        runtime.start_agent(("s", "main", 0))
    assert runtime.registry.count() == 0


@pytest.mark.parametrize(
    ("options", "error", "named"),
    [
        ({"max_tool_turns": 0}, ValueError, "max_tool_turns"),
        ({"max_tool_turns": "3"}, ValueError, "max_tool_turns"),
        ({"steering_mode": "some"}, ValueError, "steering_mode"),
        ({"restart": "permanent"}, ValueError, "restart"),
        ({"thinking_level": "huge"}, ValueError, "thinking_level"),
        ({"tool_timeout": -1}, ValueError, "tool_timeout"),
        ({"tool_timeout": float("nan")}, ValueError, "tool_timeout"),
        ({"tool_timeout": float("inf")}, ValueError, "tool_timeout.*finite"),
        ({"tool_timeout": True}, ValueError, "tool_timeout"),
        ({"tool_timeout": "5"}, ValueError, "tool_timeout"),
        ({"abort_grace": -1}, ValueError, "abort_grace"),
        ({"abort_grace": float("inf")}, ValueError, "abort_grace.*finite"),
        ({"follow_up_poll": 0.05}, TypeError, "follow_up_poll.*removed"),
        ({"system_prompt": 123}, TypeError, "system_prompt must be a str, not int"),
        ({"system_prompt": b"be brief"}, TypeError, "system_prompt must be a str, not bytes"),
        ({"model": ScriptedModel}, TypeError, "ChatModel instance, not the class ScriptedModel"),
        ({"model": "gpt"}, ConfigError, "'gpt' is not a ChatModel nor a configured model profile"),
        ({"tools": [len]}, TypeError, "tools must be"),
        ({"memory": "all"}, TypeError, "memory must be a MemoryPolicy"),
        ({"temprature": 0.1}, TypeError, "unknown agent option.*'temprature'"),
    ],
)
def test_a_bad_option_is_rejected_with_its_name(
    runtime: Runtime, options: dict[str, Any], error: type[Exception], named: str
) -> None:
    with pytest.raises(error, match=named):
        runtime.start_agent(("s", "main", 0), **{"model": ScriptedModel(), **options})
    assert runtime.registry.count() == 0


class DuckModel:
    """A ChatModel by shape only (no BaseChatModel): the Protocol decides."""

    def __init__(self) -> None:
        self.inner = ScriptedModel(["quack"])
        self.info = self.inner.info

    async def generate(self, request: Any, *, signal: Any = None) -> Any:
        return await self.inner.generate(request, signal=signal)

    def stream(self, request: Any, *, signal: Any = None) -> Any:
        return self.inner.stream(request, signal=signal)

    async def prompt(self, text: str, system: str | None = None, *, signal: Any = None) -> str:
        return await self.inner.prompt(text, system, signal=signal)

    def generate_sync(self, request: Any, *, signal: Any = None, timeout: Any = None) -> Any:
        return self.inner.generate_sync(request, signal=signal, timeout=timeout)

    def prompt_sync(self, text: str, system: str | None = None, *, timeout: Any = None) -> str:
        return self.inner.prompt_sync(text, system, timeout=timeout)


class NotQuiteModel:
    """Has `info` and `stream`, lacks the rest."""

    info = ScriptedModel().info

    def stream(self, request: Any) -> Any:
        raise AssertionError("never called")


def test_a_model_of_the_protocol_s_shape_is_accepted_and_one_short_of_it_is_not(
    runtime: Runtime,
) -> None:
    for index in range(2):  # the second time, its type is known to conform
        agent = runtime.start_agent(("s", "duck", index), model=DuckModel())
        assert agent.run("hi", timeout=10).text == "quack"
    for _ in range(2):
        with pytest.raises(TypeError, match="model must be a ChatModel, not NotQuiteModel"):
            runtime.start_agent(("s", "short", 0), model=NotQuiteModel())


@pytest.mark.parametrize(
    ("setter", "value", "error", "named"),
    [
        ("set_system_prompt", None, TypeError, "system_prompt must be a str, not NoneType"),
        ("set_system_prompt", b"x", TypeError, "system_prompt must be a str, not bytes"),
        ("set_model", None, TypeError, "model must be a ChatModel"),
        ("set_model", ScriptedModel, TypeError, "not the class ScriptedModel"),
        ("set_tools", None, TypeError, "tools must be a list of Tools, not NoneType"),
        ("set_tools", "echo", TypeError, "tools must be a list of Tools, not str"),
        ("set_tools", [len], TypeError, "tools must be agent_runtime.Tool objects"),
        ("set_tools", [echo, echo], ValueError, "duplicate tool name 'echo'"),
        ("set_steering_mode", "some", ValueError, "unknown queue mode 'some'"),
        ("set_follow_up_mode", None, ValueError, "unknown queue mode None"),
    ],
)
def test_a_setter_checks_its_value_as_start_agent_does_and_the_agent_goes_on(
    runtime: Runtime, setter: str, value: object, error: type[Exception], named: str
) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["fine"]), tools=[echo])
    with pytest.raises(error, match=named):
        getattr(agent, setter)(value)
    state = agent.state()
    assert state.system_prompt == "" and [t.name for t in state.tools] == ["echo"]
    assert agent.run("go", timeout=5).text == "fine"  # not AgentBusy, not crashed


def test_a_run_that_fails_to_start_holds_no_subscription_open(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object) -> None:
        raise ValueError("the loop refused the settings")

    monkeypatch.setattr(_actor, "loop_config", broken)
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["x"]))
    sub = agent.subscribe()
    with pytest.raises(ValueError, match="the loop refused the settings"):
        agent.run("go")
    # The unexpected failure crashes the (temporary) agent; the run that never started ends
    # its readers' wait, and no run is left to wait for, so the subscription closes with the
    # agent instead of waiting for an end that never comes.
    assert list(sub.until_end(timeout=5)) == []
    assert sub.closed


def test_a_restarted_agent_after_a_run_that_failed_to_start_takes_prompts_and_stops_cleanly(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _actor.loop_config
    failures = iter([ValueError("once")])

    def fails_once(*args: Any) -> Any:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return settings(*args)

    monkeypatch.setattr(_actor, "loop_config", fails_once)
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["x"]), restart="transient")
    sub = agent.subscribe()
    crashed = agent.ref
    with pytest.raises(ValueError, match="once"):
        agent.run("go")
    wait_until(lambda: agent.alive and agent.ref is not crashed, what="the agent restarted")
    run_id = agent.prompt("again")
    assert isinstance(list(sub.until_end(timeout=5, run_id=run_id))[-1], AgentEnd)
    agent.stop()
    assert list(sub.until_end(timeout=5)) == []  # closed: no run that never ran is awaited


def test_agent_options_are_a_frozen_typed_model(runtime: Runtime) -> None:
    options = AgentOptions.build(
        runtime.config, {"model": ScriptedModel(), "tools": [echo]}, tools=runtime.tools
    )
    assert options.tools == (echo,) and options.max_tool_turns == 25
    assert options.memory == MemoryPolicy()
    with pytest.raises(ValueError, match="frozen"):
        options.max_tool_turns = 3  # type: ignore[misc]


# -- session memory off the loop, per turn ------------------------------------------------------


class GatedStore(InMemoryStore):
    """Appends of session "slow" wait for `gate`."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.waiting = threading.Event()

    def append(self, session: str, messages: Iterable[Message]) -> int:
        if session == "slow":
            self.waiting.set()
            assert self.gate.wait(10)
        return super().append(session, messages)


def test_a_slow_session_append_stalls_no_other_agent_and_precedes_its_runs_end() -> None:
    store = GatedStore()
    memory = SessionMemory(store)
    with Runtime.start(RuntimeConfig()) as rt:
        rt.memory, rt.memory_writer.memory = memory, memory
        slow = rt.start_agent(("slow", "main", 0), model=ScriptedModel(["stored"]))
        fast = rt.start_agent(
            ("fast", "main", 0), model=ScriptedModel([ScriptedTurn(chunks=list("abcdefgh"))])
        )
        sub = slow.subscribe()
        run_id = slow.prompt("go")
        assert store.waiting.wait(5)
        events: list[Event] = list(fast.stream("meanwhile"))  # the loop is free
        assert sum(isinstance(e, MessageUpdate) for e in events) == 8
        assert slow.state().is_running  # its end waits for its append
        store.gate.set()
        ended = list(sub.until_end(timeout=5, run_id=run_id))
        assert isinstance(ended[-1], AgentEnd)
        assert texts(memory.history("slow").messages) == ["go", "stored"]


def test_each_turn_is_committed_as_one_unit(runtime: Runtime) -> None:
    model = ScriptedModel([ScriptedTurn(tool_calls=[call("e", "echo", text="hi")]), "done"])
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[echo])
    with runtime.memory.subscribe("s") as changes:
        agent.run("go", timeout=5)
        batches = []
        while (change := changes.poll(timeout=1.0)) is not None:
            assert isinstance(change, MemoryAdded)
            batches.append([m.role for m in change.messages])
            if len(batches) == 2:
                break
    assert batches == [["user", "assistant", "tool_result"], ["assistant"]]


# -- calls from the event loop ------------------------------------------------------------------


def test_handle_calls_from_an_async_tool_never_deadlock_and_blocking_ones_refuse(
    runtime: Runtime,
) -> None:
    other = runtime.start_agent(("s", "other", 0), model=ScriptedModel(["x"]))
    seen: dict[str, Any] = {}

    @tool
    async def look(ctx: ToolContext) -> str:
        """Looks at the other agent."""
        peer = ctx.runtime.registry.lookup(("s", "other", 0))
        seen["running"] = peer.state().is_running
        peer.follow_up("queued from the loop")
        with pytest.raises(RuntimeError, match="block the runtime's event loop"):
            peer.run("x")
        with pytest.raises(RuntimeError, match="block the runtime's event loop"):
            peer.wait_for_idle(1)
        return "looked"

    model = ScriptedModel([ScriptedTurn(tool_calls=[call("l", "look")]), "done"])
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[look])
    assert agent.run("go", timeout=5).text == "done"
    assert seen == {"running": False}
    wait_until(lambda: texts(other.state().follow_up_queue) == ["queued from the loop"])


# -- review findings ----------------------------------------------------------------------------


def test_a_caller_that_stops_waiting_never_crashes_the_agent(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    busy = threading.Event()

    state = _actor._HANDLERS[_actor.GetState]

    def slow_state(actor: Any, message: Any) -> Any:
        if not busy.is_set():
            busy.set()
            threading.Event().wait(0.3)  # the actor is busy answering someone else
        return state(actor, message)

    monkeypatch.setitem(_actor._HANDLERS, _actor.GetState, slow_state)
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["late"]))
    ref = agent.ref
    waiter = threading.Thread(target=agent.state)
    waiter.start()
    assert busy.wait(5)

    async def impatient() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.arun("go"), 0.05)

    asyncio.run(impatient())
    waiter.join(5)
    agent.wait_for_idle(timeout=5)  # the prompt went on without its caller
    assert exit_reason(ref) is None and agent.ref is ref and agent.alive
    assert texts(agent.state().messages) == ["go", "late"]


def test_a_failing_driver_stops_its_run(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    apply = AgentRun._apply

    def broken(self: AgentRun, event: Event) -> None:
        if isinstance(event, ToolExecutionStart):
            raise RuntimeError("driver bug")
        apply(self, event)

    monkeypatch.setattr(AgentRun, "_apply", broken)
    turns = [ScriptedTurn(tool_calls=[call(f"c{i}", "echo", text="x")]) for i in range(40)]
    model = ScriptedModel([*turns, "end"])
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[echo])
    with pytest.raises(RunFailed, match="agent_crashed: run: RuntimeError: driver bug"):
        agent.run("go", timeout=5)
    wait_until(lambda: runtime.loop_tasks.active() == 0, what="the run's loop task ended")
    assert model.call_count < 5
    wait_until(lambda: runtime.registry.lookup(("s", "main", 0)) is None, what="actor crashed")


def test_steering_handed_back_keeps_its_system_prompt(runtime: Runtime) -> None:
    gate = threading.Event()

    @tool
    def wait_here() -> str:
        """Waits for the gate."""
        gate.wait(5)
        return "done"

    calls = [call("w1", "wait_here"), call("w2", "wait_here")]
    model = ScriptedModel([ScriptedTurn(tool_calls=calls), "second"])
    agent = runtime.start_agent(
        ("s", "main", 0), model=model, tools=[wait_here], system_prompt="own", max_tool_turns=1
    )
    agent.prompt("go")
    wait_until(lambda: agent.state().pending_tool_calls == ["w1"])
    agent.steer("steered", system_prompt="A")  # taken at w1's end, handed back at the limit
    gate.set()
    agent.wait_for_idle(timeout=5)
    assert texts(agent.state().steering_queue) == ["steered"]
    agent.run("next", timeout=5)
    assert [r.system for r in model.requests] == ["own", "A"]


def test_what_a_run_did_not_deliver_comes_back_ahead_of_what_was_queued_after_it(
    runtime: Runtime,
) -> None:
    gate = threading.Event()

    @tool
    def wait_here() -> str:
        """Waits for the gate."""
        gate.wait(5)
        return "done"

    model = ScriptedModel([ScriptedTurn(tool_calls=[call("w1", "wait_here")]), "b", "c", "d"])
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[wait_here])
    agent.prompt("go")
    wait_until(lambda: agent.state().pending_tool_calls == ["w1"])
    agent.steer("s1")
    agent.follow_up("f1")
    state = agent.state()  # queued with the run, and shown while it is on
    assert texts(state.steering_queue) == ["s1"] and texts(state.follow_up_queue) == ["f1"]
    tree = runtime.tree().agent(("s", "main", 0))
    assert tree is not None and (tree.steering_queue, tree.follow_up_queue) == (1, 1)
    agent.abort()
    gate.set()
    agent.wait_for_idle(timeout=5)
    agent.steer("s2")
    agent.follow_up("f2")
    state = agent.state()
    assert texts(state.steering_queue) == ["s1", "s2"]
    assert texts(state.follow_up_queue) == ["f1", "f2"]
    agent.set_steering_mode("all")
    agent.run("next", timeout=5)  # both steering messages before its first call, then f1, f2
    assert texts(model.requests[1].messages)[-3:] == ["next", "s1", "s2"]
    assert texts(agent.state().messages)[-8:] == ["next", "s1", "s2", "b", "f1", "c", "f2", "d"]
    assert agent.state().follow_up_queue == [] == agent.state().steering_queue


def test_blocking_calls_from_the_event_loop_refuse_before_doing_anything(
    runtime: Runtime,
) -> None:
    other = runtime.start_agent(("s", "other", 0), model=ScriptedModel(["x"]))
    refused: list[str] = []

    @tool
    async def misuse(ctx: ToolContext) -> str:
        """Calls blocking API of another agent from the loop."""
        peer = ctx.runtime.registry.lookup(("s", "other", 0))
        for name, attempt in (
            ("stream", lambda: next(iter(peer.stream("x")))),
            ("reset", peer.reset),
        ):
            try:
                attempt()
            except RuntimeError as exc:
                refused.append(f"{name}: {'event loop' in str(exc)}")
        return "done"

    model = ScriptedModel([ScriptedTurn(tool_calls=[call("m", "misuse")]), "done"])
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[misuse])
    assert agent.run("go", timeout=5).text == "done"
    assert refused == ["stream: True", "reset: True"]
    assert not other.state().is_running and other.state().subscriptions == 0


class _BuggyModel(ScriptedModel):
    """A provider adapter with a bug: it raises a plain exception after its first chunk."""

    async def _stream(self, request: Any) -> Any:
        async for chunk in super()._stream(request):
            yield chunk
            raise KeyError("adapter bug")


def test_a_crashed_loop_ends_the_run_with_the_next_seq(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=_BuggyModel(["hello world"]))
    sub = agent.subscribe()
    run_id = agent.prompt("hi")
    events = list(sub.until_end(timeout=5, run_id=run_id))
    end = events[-1]
    assert isinstance(end, Error) and end.reason == "loop_crashed: KeyError: 'adapter bug'"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert agent.alive and not agent.state().is_running  # the agent goes on
