"""The Agent: runs, queues, subscriptions, responsiveness, subagents and the Runtime facade."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_runtime import (
    Agent,
    AgentBusy,
    AgentKey,
    AgentState,
    AgentStopped,
    AlreadyRegistered,
    CannotContinue,
    RunCanceled,
    RunFailed,
    Runtime,
    StreamOverflow,
    delegate,
)
from agent_runtime.agent import _actor
from agent_runtime.agent._cell import AgentCell
from agent_runtime.agent._protocol import WouldEnd
from agent_runtime.agent._run import AgentRun
from agent_runtime.config import RuntimeConfig
from agent_runtime.event_stream import Subscription
from agent_runtime.events import (
    AgentEnd,
    Canceled,
    CustomEvent,
    Event,
    EventsDropped,
    MessageEnd,
    MessageUpdate,
    ToolExecutionStart,
    is_terminal,
)
from agent_runtime.llm import ChatRequest, ProviderError
from agent_runtime.loop import RetryPolicy, validate_transcript
from agent_runtime.memory import MemoryPolicy
from agent_runtime.messages import ToolCall, ToolResultMessage, UserMessage
from agent_runtime.testing import FunctionModel, ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import Tool, ToolContext, tool
from supervisors import kill

NO_RETRY = RetryPolicy(max_retries=0)


def slow_turn(text: str = "slow", delay: float = 30.0) -> ScriptedTurn:
    return ScriptedTurn(chunks=[text[:1], text[1:]], chunk_delay=delay)


def tool_call(call_id: str, name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def test_run_returns_the_answer_and_new_messages(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["hello"]))
    result = agent.run("hi", timeout=5)
    assert result.text == "hello" and result.stop_reason == "stop"
    assert [m.role for m in result.new_messages] == ["user", "assistant"]
    assert result.usage.output_tokens > 0
    assert [m.role for m in agent.state().messages] == ["user", "assistant"]


def test_a_second_prompt_while_busy_is_rejected(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel([slow_turn()]))
    run_id = agent.prompt("one")
    with pytest.raises(AgentBusy) as info:
        agent.prompt("two")
    assert info.value.run_id == run_id
    agent.abort()
    agent.wait_for_idle(timeout=5)


def test_continue_rules(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["a", "b"]))
    with pytest.raises(CannotContinue, match="no messages"):
        agent.continue_run()
    agent.run("q", timeout=5)
    with pytest.raises(CannotContinue, match="assistant"):
        agent.continue_run()


def test_continue_works_right_after_an_aborted_tool_run(runtime: Runtime) -> None:
    gate = threading.Event()

    @tool
    def block(ctx: ToolContext) -> str:
        """Blocks until aborted."""
        ctx.signal.wait(5)
        gate.set()
        return "stopped"

    model = ScriptedModel([ScriptedTurn(tool_calls=[tool_call("c1", "block")]), "resumed"])
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[block])
    agent.prompt("go")
    wait_until(lambda: agent.state().pending_tool_calls == ["c1"])
    agent.abort()
    agent.wait_for_idle(timeout=5)
    history = agent.state().messages
    assert not validate_transcript(history)
    assert isinstance(history[-1], ToolResultMessage)
    agent.continue_run()
    agent.wait_for_idle(timeout=5)
    assert agent.state().messages[-1].text == "resumed"  # type: ignore[union-attr]


@pytest.mark.timing
def test_wait_for_idle_times_out_then_succeeds(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel([slow_turn(delay=0.3)]))
    agent.prompt("go")
    with pytest.raises(TimeoutError):
        agent.wait_for_idle(timeout=0.05)
    agent.wait_for_idle(timeout=5)
    assert not agent.state().is_running


def test_many_concurrent_waiters_all_wake(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel([slow_turn(delay=0.1)]))
    agent.prompt("go")
    woke: list[int] = []
    lock = threading.Lock()

    def wait(i: int) -> None:
        agent.wait_for_idle(timeout=5)
        with lock:
            woke.append(i)

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert sorted(woke) == list(range(20))


def test_state_error_after_a_provider_failure(runtime: Runtime) -> None:
    model = ScriptedModel([ScriptedTurn(error=ProviderError("down"))])
    agent = runtime.start_agent(("s", "main", 0), model=model, retry=NO_RETRY)
    with pytest.raises(RunFailed) as info:
        agent.run("go", timeout=5)
    assert "down" in info.value.reason
    assert agent.state().error is not None and "down" in agent.state().error  # type: ignore[operator]


PROMPT = 0.05  # DESIGN.md 7: state(), steer() and abort() answer within 50 ms while blocked


def slowest_call(*calls: Callable[[], object]) -> float:
    slowest = 0.0
    for call in calls:
        started = time.monotonic()
        call()
        slowest = max(slowest, time.monotonic() - started)
    return slowest


def assert_answers_promptly_then_aborts(agent: Agent) -> None:
    assert slowest_call(agent.state, lambda: agent.steer("hurry"), agent.state) < PROMPT
    assert agent.state().is_running
    assert slowest_call(agent.abort) < PROMPT


def test_the_agent_answers_promptly_while_blocked_on_a_tool(runtime: Runtime) -> None:
    release = threading.Event()

    @tool
    def stuck() -> str:
        """Blocks."""
        release.wait(10)
        return "ok"

    model = ScriptedModel([ScriptedTurn(tool_calls=[tool_call("c", "stuck")])])
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[stuck])
    agent.prompt("go")
    wait_until(lambda: agent.state().pending_tool_calls == ["c"])
    assert_answers_promptly_then_aborts(agent)
    release.set()
    agent.wait_for_idle(timeout=5)


def test_the_agent_answers_promptly_while_blocked_on_a_model_stream(runtime: Runtime) -> None:
    model = ScriptedModel([slow_turn()])
    agent = runtime.start_agent(("s", "main", 0), model=model)
    agent.prompt("go")
    wait_until(lambda: agent.state().stream_message is not None)  # first delta is in
    assert_answers_promptly_then_aborts(agent)
    agent.wait_for_idle(timeout=5)  # the abort closed the hung stream


def test_the_agent_answers_promptly_while_blocked_on_a_slow_subscriber(runtime: Runtime) -> None:
    agent = runtime.start_agent(
        ("s", "main", 0), model=ScriptedModel([ScriptedTurn(chunks=list("abcdef"))])
    )
    slow_reader = agent.subscribe(max_queue=1, overflow="block", block_timeout=10)
    agent.prompt("go")
    wait_until(lambda: slow_reader.stream.stats().queue_size == 1)  # the run waits on it
    assert_answers_promptly_then_aborts(agent)
    slow_reader.close()
    agent.wait_for_idle(timeout=5)


def test_streamed_tokens_cost_no_cross_thread_wakeups(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    wakeups = 0
    original = asyncio.BaseEventLoop.call_soon_threadsafe

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal wakeups
        wakeups += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(asyncio.BaseEventLoop, "call_soon_threadsafe", counted)

    def wakeups_for(index: int, tokens: int) -> int:
        nonlocal wakeups
        model = ScriptedModel([ScriptedTurn(chunks=["x"] * tokens)])
        agent = runtime.start_agent(("s", "hops", index), model=model)
        wakeups = 0
        agent.run("go", timeout=10)
        return wakeups

    few, many = wakeups_for(0, 10), wakeups_for(1, 500)
    assert many <= few + 2 and many < 10  # a fixed handful per run, not one per token


def test_a_subscriber_that_comes_mid_step_finds_the_facts_of_what_it_sees(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tool's start was recorded with nobody watching (its facts then wait for the end
    # of the loop's step); a subscription published right then must not see the start
    # before the actor does.
    gate = threading.Event()
    joined: dict[str, Any] = {}

    @tool
    def hold() -> str:
        """Wait for the test."""
        gate.wait(10)
        return "held"

    original = AgentRun._apply

    def apply_then_subscribe(self: AgentRun, event: Any) -> None:
        original(self, event)
        if isinstance(event, ToolExecutionStart) and "sub" not in joined:
            joined["sub"] = joined["agent"].subscribe()  # as if the actor took it just now

    checked = threading.Event()
    fan_out = AgentCell.fan_out_now

    def fan_out_then_wait(self: AgentCell, event: Any, terminal: bool) -> Any:
        full = fan_out(self, event, terminal)
        if isinstance(event, ToolExecutionStart):
            checked.wait(5)  # the loop's step goes on only once the reader looked
        return full

    monkeypatch.setattr(AgentRun, "_apply", apply_then_subscribe)
    monkeypatch.setattr(AgentCell, "fan_out_now", fan_out_then_wait)
    model = ScriptedModel([ScriptedTurn(tool_calls=[tool_call("h", "hold")]), "done"])
    agent = runtime.start_agent(
        ("s", "midstep", 0), model=model, tools=[hold], memory=MemoryPolicy.none()
    )
    joined["agent"] = agent
    agent.prompt("go")
    wait_until(lambda: "sub" in joined, what="the subscription mid-step")
    try:
        for event in joined["sub"].until_end(timeout=10):
            if isinstance(event, ToolExecutionStart):
                pending = agent.state().pending_tool_calls
                checked.set()
                assert pending == ["h"]
                break
        else:
            raise AssertionError("the subscriber never saw the tool start")
    finally:
        checked.set()
        gate.set()
    agent.wait_for_idle(timeout=5)


def test_unsubscribe_and_a_dropped_subscription_are_pruned(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["a", "b"]))
    kept = agent.subscribe()
    dropped = agent.subscribe()
    closed = agent.subscribe()
    closed.close()
    del dropped
    gc.collect()
    agent.run("go", timeout=5)
    assert agent.state().subscriptions == 1  # only `kept` is left
    events = list(kept.until_end(timeout=5))
    assert isinstance(events[-1], AgentEnd)


def test_a_blocked_subscriber_is_closed_after_its_timeout_and_others_are_unaffected(
    runtime: Runtime,
) -> None:
    agent = runtime.start_agent(
        ("s", "main", 0), model=ScriptedModel([ScriptedTurn(chunks=list("abcdefgh"))])
    )
    stuck = agent.subscribe(max_queue=2, overflow="block", block_timeout=0.1)
    reader = agent.subscribe(max_queue=1000)
    result = agent.run("go", timeout=5)
    assert result.text == "abcdefgh"
    assert isinstance(list(reader.until_end(timeout=5))[-1], AgentEnd)
    with pytest.raises(StreamOverflow):
        list(stuck)


def test_drop_oldest_subscribers_see_every_gap(runtime: Runtime) -> None:
    agent = runtime.start_agent(
        ("s", "main", 0), model=ScriptedModel([ScriptedTurn(chunks=list("abcdefghij"))])
    )
    lossy = agent.subscribe(max_queue=3, overflow="drop_oldest")
    agent.run("go", timeout=5)
    events = list(lossy.until_end(timeout=5))
    assert any(isinstance(e, EventsDropped) for e in events)
    assert isinstance(events[-1], AgentEnd)


def test_subscribers_receive_a_tools_custom_events_in_order_with_the_run(runtime: Runtime) -> None:
    @tool
    def report(ctx: ToolContext) -> str:
        """Report."""
        ctx.emit("phase", {"name": "read"})
        ctx.emit("phase", {"name": "write"})
        return "done"

    model = ScriptedModel([ScriptedTurn(tool_calls=[tool_call("r", "report")]), "ok"])
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[report])
    sub = agent.subscribe()
    run_id = agent.prompt("go")
    events = list(sub.until_end(timeout=5))
    kinds = [type(e).__name__ for e in events]
    start, end = kinds.index("ToolExecutionStart"), kinds.index("ToolExecutionEnd")
    assert kinds[start + 1 : end] == ["CustomEvent", "CustomEvent"]
    custom = [e for e in events if isinstance(e, CustomEvent)]
    assert [e.data for e in custom] == [{"name": "read"}, {"name": "write"}]
    assert all(e.agent == agent.key and e.run_id == run_id for e in custom)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def test_error_policy_closes_the_subscription_at_once(runtime: Runtime) -> None:
    agent = runtime.start_agent(
        ("s", "main", 0), model=ScriptedModel([ScriptedTurn(chunks=list("abcdef"))])
    )
    strict = agent.subscribe(max_queue=2, overflow="error")
    agent.run("go", timeout=5)
    assert strict.closed
    with pytest.raises(StreamOverflow):
        list(strict)


@pytest.mark.timing
def test_a_blocked_subscriber_stalls_no_other_agent(runtime: Runtime) -> None:
    blocked = runtime.start_agent(
        ("s", "blocked", 0), model=ScriptedModel([ScriptedTurn(chunks=list("abcdef"))])
    )
    free = runtime.start_agent(("s", "free", 0), model=ScriptedModel(["fine"]))
    stuck = blocked.subscribe(max_queue=1, overflow="block", block_timeout=10)
    blocked.prompt("go")
    wait_until(lambda: stuck.stream.stats().queue_size == 1)
    started = time.monotonic()
    assert free.run("go", timeout=5).text == "fine"
    assert time.monotonic() - started < 1.0
    assert blocked.state().is_running
    stuck.close()
    blocked.wait_for_idle(timeout=5)


def test_a_follow_up_after_the_end_waits_in_the_queue_for_the_next_prompt(
    runtime: Runtime,
) -> None:
    # However soon it comes after the end: no run starts that nobody prompted.
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["first", "second", "third"]))
    agent.run("go", timeout=5)
    agent.follow_up("later")
    state = agent.state()
    assert [m.text for m in state.follow_up_queue] == ["later"]  # type: ignore[attr-defined]
    assert not state.is_running
    agent.wait_for_idle(timeout=5)
    assert len(agent.state().messages) == 2
    result = agent.run("next", timeout=5)
    assert [m.text for m in result.new_messages] == ["next", "second", "later", "third"]  # type: ignore[attr-defined]


def gated_pause() -> tuple[dict[str, threading.Event], Tool]:
    gates: dict[str, threading.Event] = {}

    @tool
    def pause(gate: str) -> str:
        """Waits for the test to open `gate`."""
        gates.setdefault(gate, threading.Event()).wait(5)
        return "ok"

    return gates, pause


def user_texts(request: ChatRequest) -> list[str]:
    return [m.text for m in request.messages if isinstance(m, UserMessage)]


def test_a_steering_mode_switch_mid_run_applies_at_the_next_consumption(
    runtime: Runtime,
) -> None:
    gates, pause = gated_pause()
    gates.update(p1=threading.Event(), p2=threading.Event())
    turns = [
        ScriptedTurn(tool_calls=[tool_call("c1", "pause", gate="p1")]),
        ScriptedTurn(tool_calls=[tool_call("c2", "pause", gate="p2")]),
        "done",
    ]
    model = ScriptedModel(turns)
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[pause])
    agent.prompt("go")
    wait_until(lambda: agent.state().pending_tool_calls == ["c1"])
    for text in ("s1", "s2", "s3"):
        agent.steer(text)
    gates["p1"].set()
    wait_until(lambda: agent.state().pending_tool_calls == ["c2"])
    agent.set_steering_mode("all")
    gates["p2"].set()
    agent.wait_for_idle(timeout=5)
    assert user_texts(model.requests[1]) == ["go", "s1"]  # one at a time before the switch
    assert user_texts(model.requests[2]) == ["go", "s1", "s2", "s3"]  # all after it
    assert model.call_count == 3


def test_a_follow_up_mode_switch_mid_run_applies_at_the_next_consumption(
    runtime: Runtime,
) -> None:
    gates, pause = gated_pause()
    gates.update(p1=threading.Event(), p2=threading.Event())
    turns = [
        ScriptedTurn(tool_calls=[tool_call("c1", "pause", gate="p1")]),
        "a",
        ScriptedTurn(tool_calls=[tool_call("c2", "pause", gate="p2")]),
        "b",
        "c",
    ]
    model = ScriptedModel(turns)
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[pause])
    agent.prompt("go")
    wait_until(lambda: agent.state().pending_tool_calls == ["c1"])
    for text in ("f1", "f2", "f3"):
        agent.follow_up(text)
    gates["p1"].set()
    wait_until(lambda: agent.state().pending_tool_calls == ["c2"])
    agent.set_follow_up_mode("all")
    gates["p2"].set()
    agent.wait_for_idle(timeout=5)
    assert user_texts(model.requests[2]) == ["go", "f1"]  # one at a time before the switch
    assert user_texts(model.requests[4]) == ["go", "f1", "f2", "f3"]  # all after it
    assert model.call_count == 5
    assert agent.state().follow_up_queue == []


def test_a_follow_up_that_misses_the_runs_last_look_waits_for_the_next_prompt(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run had no follow-up and its actor, handling its WouldEnd, pushed it none: it
    # ends. One that arrives right then (sent from the actor's own loop, the tightest
    # schedule there is) starts no run of its own, and wait_for_idle() returns with it
    # queued; the next prompt's run takes it.
    model = ScriptedModel(["first", "second", "third"])
    agent = runtime.start_agent(("s", "main", 0), model=model)
    would_end = _actor._HANDLERS[WouldEnd]

    def last_look_then_late(actor: Any, message: WouldEnd) -> Any:
        answer = would_end(actor, message)
        if model.call_count == 1:
            actor.actor_ref.tell(_actor.FollowUp(_actor.Queued(UserMessage(content="late"))))
        return answer

    monkeypatch.setitem(_actor._HANDLERS, WouldEnd, last_look_then_late)
    agent.run("go", timeout=5)
    agent.wait_for_idle(timeout=5)
    state = agent.state()
    assert [m.text for m in state.messages] == ["go", "first"]  # type: ignore[union-attr]
    assert [m.text for m in state.follow_up_queue] == ["late"]  # type: ignore[union-attr]
    assert model.call_count == 1 and not state.is_running
    agent.run("next", timeout=5)
    texts = [m.text for m in agent.state().messages]  # type: ignore[union-attr]
    assert texts == ["go", "first", "next", "second", "late", "third"]


def test_a_reader_that_sees_the_end_can_prompt_at_once_while_another_reader_lags(
    runtime: Runtime,
) -> None:
    model = ScriptedModel([ScriptedTurn(chunks=["a", "b"])] * 3)
    agent = runtime.start_agent(("s", "main", 0), model=model)
    with agent.subscribe() as counter:
        first = agent.prompt("one")
        per_run = len(list(counter.until_end(timeout=5, run_id=first))) - 1
    reader = agent.subscribe()
    # Full exactly when the terminal comes: the run's driver then waits on this reader.
    lagging = agent.subscribe(max_queue=per_run, overflow="block", block_timeout=10)
    second = agent.prompt("two")
    assert isinstance(list(reader.until_end(timeout=5))[-1], AgentEnd)
    third = agent.prompt("three")  # no AgentBusy: the agent went idle before the end was sent
    # The lagging reader still gets the runs in order: all of the second, then the third.
    assert {e.run_id for e in lagging.until_end(timeout=5)} == {second}
    assert {e.run_id for e in lagging.until_end(timeout=5)} == {third}
    agent.wait_for_idle(timeout=5)


def test_a_dropped_subscription_releases_a_run_blocked_on_it(runtime: Runtime) -> None:
    agent = runtime.start_agent(
        ("s", "main", 0), model=ScriptedModel([ScriptedTurn(chunks=list("abcdef"))])
    )
    sub = agent.subscribe(max_queue=1, overflow="block", block_timeout=30)
    buffer = sub.stream  # held by the test; the subscription itself is dropped below
    agent.prompt("go")
    wait_until(lambda: buffer.stats().queue_size == 1)
    del sub
    gc.collect()
    agent.wait_for_idle(timeout=5)  # well before the 30 s block_timeout
    assert agent.state().subscriptions == 0


def test_steering_mode_all_delivers_everything_at_once(runtime: Runtime) -> None:
    release = threading.Event()

    @tool
    def pause() -> str:
        """Waits for the test."""
        release.wait(5)
        return "ok"

    model = ScriptedModel([ScriptedTurn(tool_calls=[tool_call("p", "pause")]), "done"])
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[pause], steering_mode="all")
    agent.prompt("go")
    wait_until(lambda: agent.state().pending_tool_calls == ["p"])
    agent.steer("a")
    agent.steer("b")
    release.set()
    agent.wait_for_idle(timeout=5)
    texts = [m.text for m in model.requests[1].messages if isinstance(m, UserMessage)]
    assert texts[-2:] == ["a", "b"]
    assert model.call_count == 2


def test_reset_aborts_the_run_then_clears(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel([slow_turn()]))
    agent.prompt("go")
    agent.follow_up("later")
    agent.reset()
    state = agent.state()
    assert not state.is_running and state.messages == [] and state.follow_up_queue == []


def test_nothing_of_a_reset_run_reaches_the_next_runs_history(runtime: Runtime) -> None:
    @tool
    def lingers(ctx: ToolContext) -> str:
        """Returns only once aborted, within the abort grace."""
        ctx.signal.wait(5)
        return "late result"

    model = ScriptedModel([ScriptedTurn(tool_calls=[tool_call("c", "lingers")]), "fresh"])
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[lingers])
    agent.prompt("old")
    wait_until(lambda: agent.state().pending_tool_calls == ["c"])
    agent.reset()
    assert agent.state().messages == []
    assert agent.run("new", timeout=5).text == "fresh"
    assert [m.text for m in model.requests[1].messages] == ["new"]  # type: ignore[attr-defined]
    assert [m.text for m in agent.state().messages] == ["new", "fresh"]  # type: ignore[attr-defined]


def test_ten_concurrent_aborts_do_not_crash_the_agent(runtime: Runtime) -> None:
    model = ScriptedModel([slow_turn(), "after"])
    agent = runtime.start_agent(("s", "main", 0), model=model)
    agent.prompt("go")
    wait_until(lambda: model.call_count == 1)
    threads = [threading.Thread(target=agent.abort) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5)
    agent.wait_for_idle(timeout=5)
    assert agent.alive
    assert agent.run("again", timeout=5).text == "after"


def test_a_run_canceled_by_abort_raises_run_canceled(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel([slow_turn()]))

    def abort_once_running() -> None:  # an abort of an idle agent would find no run
        wait_until(lambda: agent.state().is_running, timeout=5, what="the run started")
        agent.abort("user_abort")

    threading.Thread(target=abort_once_running, daemon=True).start()
    with pytest.raises(RunCanceled, match="user_abort"):
        agent.run("go", timeout=5)


def test_registry_lookups_and_listing_of_subagents(runtime: Runtime) -> None:
    a = runtime.subagents.start(("s1", "research", 0), model=ScriptedModel([]))
    b = runtime.subagents.start(("s1", "research", 1), model=ScriptedModel([]))
    c = runtime.subagents.start(("s2", "main", 0), model=ScriptedModel([]))
    assert runtime.registry.lookup(("s1", "research", 1)) is b
    assert [(r, i) for r, i, _ in runtime.registry.list_by_session("s1")] == [
        ("research", 0),
        ("research", 1),
    ]
    assert runtime.subagents.count() == 3
    assert runtime.subagents.list() == [a, b, c]
    assert runtime.registry.next_index("s1", "research") == 2
    with pytest.raises(AlreadyRegistered) as info:
        runtime.subagents.start(("s1", "research", 0), model=ScriptedModel([]))
    assert info.value.holder is a


def test_a_crashed_temporary_agent_is_gone_and_its_siblings_are_untouched(runtime: Runtime) -> None:
    victim = runtime.start_agent(("s", "victim", 0), model=ScriptedModel([slow_turn()]))
    sibling = runtime.start_agent(("s", "sibling", 0), model=ScriptedModel(["still here"]))
    victim.prompt("go")
    kill(victim.ref)
    wait_until(lambda: runtime.registry.lookup(("s", "victim", 0)) is None)
    assert not victim.alive
    with pytest.raises(AgentStopped):
        victim.prompt("again")
    assert sibling.run("hi", timeout=5).text == "still here"
    assert runtime.subagents.count() == 1


def test_a_crashed_transient_agent_restarts_with_its_history(runtime: Runtime) -> None:
    agent = runtime.start_agent(
        ("s", "main", 0), model=ScriptedModel(["one", "two"]), restart="transient"
    )
    agent.run("first", timeout=5)
    old_ref = agent.ref
    kill(old_ref)
    wait_until(lambda: agent.ref is not old_ref and agent.alive)
    assert runtime.registry.lookup(("s", "main", 0)) is agent
    assert [m.text for m in agent.state().messages] == ["first", "one"]  # type: ignore[attr-defined]
    assert agent.run("second", timeout=5).text == "two"


def test_stop_and_stop_all(runtime: Runtime) -> None:
    agents = [runtime.start_agent(("s", "w", i), model=ScriptedModel([])) for i in range(4)]
    assert runtime.subagents.stop(agents[0])
    assert not runtime.subagents.stop(agents[0])
    with pytest.raises(AgentStopped):
        agents[0].state() if False else agents[0].prompt("x")
    assert runtime.subagents.stop_all() == 3
    assert runtime.subagents.count() == 0
    assert runtime.registry.count() == 0


def test_bad_input(runtime: Runtime) -> None:
    with pytest.raises(TypeError, match="'temprature'"):
        runtime.start_agent(("s", "main", 0), model=ScriptedModel([]), temprature=0.5)
    for key in [("s", "main", -1), ("s", "main"), ("", "main", 0), ("s", "", 0), ("s", "m", True)]:
        with pytest.raises(ValueError, match="agent key"):
            runtime.start_agent(key, model=ScriptedModel([]))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="agent key"):
        runtime.subagents.start("s/main/0", model=ScriptedModel([]))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="steering_mode"):
        runtime.start_agent(("s", "main", 0), model=ScriptedModel([]), steering_mode="some")
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel([]))
    with pytest.raises(TypeError):
        agent.prompt(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("method", ["steer", "follow_up"])
def test_steer_and_follow_up_take_exactly_one_message(runtime: Runtime, method: str) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel([]))
    queue = getattr(agent, method)
    with pytest.raises(ValueError, match=rf"{method}\(\) takes one message.*list of 0"):
        queue([])
    with pytest.raises(ValueError, match="list of 2"):
        queue([UserMessage(content="a"), UserMessage(content="b")])
    with pytest.raises(TypeError, match="system_prompt must be a str"):
        queue("x", system_prompt=123)
    queue([UserMessage(content="one")])  # a list of one, as before
    state = agent.state()
    queued = state.steering_queue if method == "steer" else state.follow_up_queue
    assert [m.text for m in queued] == ["one"]  # type: ignore[union-attr]


def test_hundred_agents_each_running_three_turns_at_once(runtime: Runtime) -> None:
    @tool(parallel_safe=True)
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    agents = []
    for i in range(100):
        turns = [
            ScriptedTurn(tool_calls=[tool_call(f"c{i}a", "add", a=i, b=1)]),
            ScriptedTurn(tool_calls=[tool_call(f"c{i}b", "add", a=i, b=2)]),
            f"done {i}",
        ]
        agents.append(
            runtime.start_agent((f"load-{i}", "worker", 0), model=ScriptedModel(turns), tools=[add])
        )
    for agent in agents:
        agent.prompt("go")
    for agent in agents:
        agent.wait_for_idle(timeout=30)
    for i, agent in enumerate(agents):
        history = agent.state().messages
        assert not validate_transcript(history)
        assert history[-1].text == f"done {i}"  # type: ignore[union-attr]
        assert len(history) == 6


def test_thinking_level_reaches_the_model_request(runtime: Runtime) -> None:
    model = ScriptedModel(["x"])
    runtime.start_agent(("s", "main", 0), model=model, thinking_level="high").run("go", timeout=5)
    assert model.requests[0].reasoning == "high"


def test_agents_opt_into_runtime_tools_and_their_own_win(runtime: Runtime) -> None:
    @tool(name="lookup")
    def shared_lookup() -> str:
        """Shared."""
        return "shared"

    @tool(name="lookup")
    def own_lookup() -> str:
        """Own."""
        return "own"

    @tool
    def extra() -> str:
        """Extra."""
        return "extra"

    runtime.tools.register(shared_lookup)
    runtime.tools.register(extra)
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[tool_call("c", "lookup"), tool_call("d", "extra")]), "ok"]
    )
    agent = runtime.start_agent(
        ("s", "main", 0), model=model, tools=[own_lookup], tool_registry=True
    )
    agent.run("go", timeout=5)
    results = [m for m in agent.state().messages if isinstance(m, ToolResultMessage)]
    assert [r.text for r in results] == ["own", "extra"]
    plain_model = ScriptedModel(["x"])
    plain = runtime.start_agent(("s", "plain", 0), model=plain_model)
    plain.run("go", timeout=5)
    assert plain_model.requests[0].tools == []


@pytest.mark.timing
def test_runtime_stop_aborts_running_agents_and_pairs_their_calls() -> None:
    @tool
    def hang(ctx: ToolContext) -> str:
        """Waits for abort."""
        ctx.signal.wait(10)
        return "aborted cleanly"

    threads_before = set(threading.enumerate())
    rt = Runtime.start(RuntimeConfig())
    agent = rt.start_agent(
        ("s", "main", 0),
        model=ScriptedModel([ScriptedTurn(tool_calls=[tool_call("h", "hang")])]),
        tools=[hang],
    )
    streaming = rt.start_agent(("s", "streaming", 0), model=ScriptedModel([slow_turn()]))
    leaf_model = ScriptedModel([slow_turn()])
    delegating = rt.start_agent(
        ("d", "top", 0),
        model=ScriptedModel(
            [ScriptedTurn(tool_calls=[tool_call("d", "delegate", role="leaf", task="t")])]
        ),
        tools=[delegate(["leaf"], model=leaf_model)],
    )
    subs = {each.key: each.subscribe(max_queue=10_000) for each in (agent, streaming, delegating)}
    for each in (agent, streaming, delegating):
        each.prompt("go")
    wait_until(lambda: agent.state().pending_tool_calls == ["h"] and leaf_model.call_count == 1)
    leaf = rt.registry.lookup(("d", "leaf", 0))
    started = time.monotonic()
    rt.stop(timeout=10)
    assert time.monotonic() - started < 5
    for each in (agent, streaming, delegating, leaf):
        assert not each.alive
    for key, sub in subs.items():
        events = [e for e in sub if e.agent == key]  # ends: the stopped agent closed it
        assert isinstance(events[-1], Canceled)
        history = [e.message for e in events if isinstance(e, MessageEnd)]
        assert not validate_transcript(history)
        if key == agent.key:
            last = history[-1]
            assert isinstance(last, ToolResultMessage) and last.text == "aborted cleanly"
    assert rt.abort_table.count() == 0
    wait_until(lambda: set(threading.enumerate()) <= threads_before, what="no thread left")


def test_stream_yields_the_run_and_astream_and_arun_work_in_asyncio(runtime: Runtime) -> None:
    agent = runtime.start_agent(
        ("s", "main", 0), model=ScriptedModel([ScriptedTurn(chunks=["a", "b"]), "async", "c"])
    )
    events = list(agent.stream("go"))
    assert isinstance(events[-1], AgentEnd)
    assert sum(isinstance(e, MessageUpdate) for e in events) == 2

    async def use_async() -> tuple[str, list[str]]:
        result = await agent.arun("again", timeout=5)
        names = [type(e).__name__ async for e in agent.astream("third")]
        return result.text, names

    text, names = asyncio.run(use_async())
    assert text == "async" and names[-1] == "AgentEnd"


def test_stream_yields_only_its_own_run_when_it_starts_as_another_run_ends(
    runtime: Runtime,
) -> None:
    # Another caller's run ends while this caller retries `stream()` on AgentBusy: the
    # stream's subscription must not take in the end of that run (a second terminal).
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(echo=True))
    for _ in range(30):
        other = agent.prompt("someone else's")
        while True:
            try:
                events = list(agent.stream("mine"))
                break
            except AgentBusy:
                continue
        mine = events[-1].run_id
        assert mine != other
        assert {e.run_id for e in events} == {mine}
        assert sum(is_terminal(e) for e in events) == 1


def test_async_for_over_a_subscription(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["x"]))
    sub = agent.subscribe()

    async def read() -> list[str]:
        out = []
        async for event in sub:
            out.append(type(event).__name__)
            if isinstance(event, AgentEnd):
                break
        return out

    agent.prompt("go")
    assert asyncio.run(read())[-1] == "AgentEnd"
    sub.close()


def test_every_call_on_a_stopped_agent_raises_agent_stopped(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel([]))
    agent.stop()

    async def use_async() -> None:
        with pytest.raises(AgentStopped):
            await agent.arun("x")
        with pytest.raises(AgentStopped):
            [e async for e in agent.astream("x")]

    calls: dict[str, Callable[[], object]] = {
        "prompt": lambda: agent.prompt("x"),
        "continue_run": agent.continue_run,
        "steer": lambda: agent.steer("x"),
        "follow_up": lambda: agent.follow_up("x"),
        "abort": agent.abort,
        "wait_for_idle": agent.wait_for_idle,
        "run": lambda: agent.run("x"),
        "stream": lambda: list(agent.stream("x")),
        "subscribe": agent.subscribe,
        "state": agent.state,
        "reset": agent.reset,
        "set_system_prompt": lambda: agent.set_system_prompt("p"),
        "set_model": lambda: agent.set_model(ScriptedModel([])),
        "set_tools": lambda: agent.set_tools([]),
        "set_steering_mode": lambda: agent.set_steering_mode("all"),
        "set_follow_up_mode": lambda: agent.set_follow_up_mode("all"),
    }
    for name, call in calls.items():
        with pytest.raises(AgentStopped):
            call()
            pytest.fail(f"{name} on a stopped agent did not raise AgentStopped")
    asyncio.run(use_async())
    agent.stop()  # idempotent
    assert agent.key == AgentKey("s", "main", 0) and not agent.alive and not agent.ref.is_alive()


def test_agents_of_a_session_share_its_durable_history(runtime: Runtime) -> None:
    first = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["one"]))
    first.run("hello", timeout=5)
    assert [m.text for m in runtime.memory.history("s").messages] == ["hello", "one"]  # type: ignore[attr-defined]
    second = runtime.start_agent(("s", "other", 0), model=ScriptedModel(["two"]))
    assert [m.text for m in second.state().messages] == ["hello", "one"]  # type: ignore[attr-defined]
    second.run("again", timeout=5)
    history = runtime.memory.history("s")
    assert [m.text for m in history.messages] == ["hello", "one", "again", "two"]  # type: ignore[attr-defined]
    assert history.sequence == 2  # one batch per run


def test_session_history_survives_the_runtime(tmp_path: Path) -> None:
    with Runtime.start(RuntimeConfig()) as rt:
        rt.start_agent(("s", "main", 0), model=ScriptedModel(["kept"])).run("q", timeout=5)
    with Runtime.start(RuntimeConfig()) as rt:  # same working directory: same SQLite file
        agent = rt.start_agent(("s", "main", 0), model=ScriptedModel([]))
        assert [m.text for m in agent.state().messages] == ["q", "kept"]  # type: ignore[attr-defined]
    assert (tmp_path / ".agent_runtime" / "memory.sqlite3").exists()


def test_memory_policies_read_write_and_window(runtime: Runtime) -> None:

    runtime.start_agent(("s", "a", 0), model=ScriptedModel(["1", "2"])).run("x", timeout=5)
    blind = runtime.start_agent(
        ("s", "blind", 0), model=ScriptedModel(["3"]), memory=MemoryPolicy.write_only()
    )
    assert blind.state().messages == []
    blind.run("y", timeout=5)
    silent = runtime.start_agent(
        ("s", "silent", 0), model=ScriptedModel(["4"]), memory=MemoryPolicy.read_only()
    )
    silent.run("z", timeout=5)
    assert [m.text for m in runtime.memory.history("s").messages] == ["x", "1", "y", "3"]  # type: ignore[attr-defined]
    windowed = runtime.start_agent(
        ("s", "w", 0), model=ScriptedModel([]), memory=MemoryPolicy.limited_window(2)
    )
    assert [m.text for m in windowed.state().messages] == ["y", "3"]  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="MemoryPolicy"):
        runtime.start_agent(("s", "bad", 0), model=ScriptedModel([]), memory=object())


def test_a_delegated_subagent_neither_reads_nor_writes_the_session(runtime: Runtime) -> None:
    from agent_runtime import delegate

    ask = ScriptedTurn(tool_calls=[tool_call("d", "delegate", role="helper", task="t")])
    top = runtime.start_agent(
        ("s", "top", 0),
        model=ScriptedModel([ask, "done"]),
        tools=[delegate(model=ScriptedModel(["helped"]))],
    )
    top.run("go", timeout=5)
    helper = runtime.registry.lookup(("s", "helper", 0))
    assert [m.text for m in helper.state().messages] == ["t", "helped"]  # type: ignore[attr-defined]
    texts = [getattr(m, "text", "") for m in runtime.memory.history("s").messages]
    assert texts == ["go", "", "helped", "done"]  # the top's run only; the helper's "t" is not


def test_a_subscription_made_mid_run_reads_the_rest_of_that_run(runtime: Runtime) -> None:
    model = ScriptedModel([ScriptedTurn(chunks=["a", "b"], chunk_delay=0.05)])
    agent = runtime.start_agent(("s", "main", 0), model=model)
    run_id = agent.prompt("go")
    wait_until(lambda: agent.state().stream_message is not None)
    with agent.subscribe() as late:
        events = list(late.until_end(timeout=5))
    assert late.closed
    assert isinstance(events[-1], AgentEnd) and {e.run_id for e in events} == {run_id}
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and seqs[0] > 1  # it joined mid-run, in order, gap-free after
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))


def test_agent_state_round_trips_through_json(runtime: Runtime) -> None:
    @tool
    def noop() -> str:
        """Nothing."""
        return ""

    agent = runtime.start_agent(
        ("s", "main", 0), model=ScriptedModel(["x"]), tools=[noop], system_prompt="sys"
    )
    agent.run("go", timeout=5)
    agent.steer("queued for the next run")
    state = agent.state()
    assert AgentState.model_validate_json(state.model_dump_json()) == state
    assert state.tools[0].name == "noop" and state.system_prompt == "sys"


def test_stopping_an_agent_mid_stream_ends_the_stream_with_the_runs_canceled(
    runtime: Runtime,
) -> None:
    model = ScriptedModel([slow_turn()])
    agent = runtime.start_agent(("s", "main", 0), model=model)
    watcher = agent.subscribe()
    stopper = threading.Thread(
        target=lambda: (wait_until(lambda: model.call_count == 1), agent.stop())
    )
    stopper.start()
    events = list(agent.stream("go"))
    stopper.join(timeout=5)
    assert isinstance(events[-1], Canceled) and events[-1].agent == agent.key
    assert isinstance(list(watcher)[-1], Canceled)  # then the subscription is closed
    assert watcher.closed


def test_stop_returns_without_waiting_for_the_aborted_runs_tool(
    make_runtime: Callable[..., Runtime],
) -> None:
    runtime = make_runtime(agent={"abort_grace": 30.0})
    entered, gate = threading.Event(), threading.Event()

    @tool
    def stubborn() -> str:
        """Ignores the abort until the gate opens."""
        entered.set()
        gate.wait(10)
        return "late"

    model = ScriptedModel([ScriptedTurn(tool_calls=[ToolCall(id="c", name="stubborn")])])
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[stubborn])
    sub = agent.subscribe()
    agent.prompt("go")
    assert entered.wait(5)
    began = time.monotonic()
    agent.stop()
    assert time.monotonic() - began < 5  # not the 30 s of abort grace
    assert not agent.alive
    gate.set()  # the tool returns: the run ends, its terminal reaches the subscription
    assert isinstance(list(sub.until_end(timeout=10))[-1], Canceled)


def test_a_run_accepted_before_the_last_end_was_delivered_reaches_subscribers_after_stop(
    runtime: Runtime,
) -> None:
    # The actor hears of a run's end just before the end is delivered, so it may accept the
    # next run meanwhile; a stop() then must still deliver both ends before closing
    # (DESIGN.md 7). The first end's delivery is held here to make that window certain.
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["one", "two"]))
    sub = agent.subscribe()
    held, gate = threading.Event(), threading.Event()
    cell = agent._cell
    fan_out_now, fan_out_rest = cell.fan_out_now, cell.fan_out_rest
    hold: list[Any] = [object()]  # what the patched fan_out_now hands over to be waited for

    def holding_fan_out_now(event: Event, terminal: bool) -> list[Any]:
        if isinstance(event, AgentEnd) and not held.is_set():
            return hold  # delivered later, by held_fan_out_rest
        return fan_out_now(event, terminal)

    async def held_fan_out_rest(full: list[Any], event: Event, until: Any = None) -> None:
        if full is hold:
            held.set()
            await asyncio.to_thread(gate.wait, 10)
            full = fan_out_now(event, True)
        await fan_out_rest(full, event, until)

    cell.fan_out_now = holding_fan_out_now  # type: ignore[method-assign]
    cell.fan_out_rest = held_fan_out_rest  # type: ignore[method-assign]
    first = agent.prompt("one")
    wait_until(held.is_set)
    wait_until(lambda: not agent.state().is_running)
    second = agent.prompt("two")  # accepted: the first run has ended for the actor
    agent.stop()
    gate.set()
    assert isinstance(list(sub.until_end(timeout=5, run_id=first))[-1], AgentEnd)
    ends = list(sub.until_end(timeout=5, run_id=second))
    assert [type(e) for e in ends[-1:]] == [Canceled] and ends[-1].run_id == second
    assert list(sub) == []  # then the subscription closes
    assert sub.closed


def stalled_run(runtime: Runtime) -> tuple[Agent, Subscription, Subscription]:
    """An agent whose run waits for a `block` subscription nobody reads (its 2 events read
    by nobody), beside one that keeps up (read into a list by a thread)."""
    chunks = [str(i) for i in range(100)]
    agent = runtime.start_agent(
        ("s", "main", 0), model=ScriptedModel([ScriptedTurn(chunks=chunks)])
    )
    stalled = agent.subscribe(max_queue=2, block_timeout=60)
    healthy = agent.subscribe(max_queue=10_000)
    agent.prompt("go")
    wait_until(lambda: stalled.stream.stats().queue_size == 2)
    return agent, stalled, healthy


def test_an_abort_ends_a_run_that_waits_for_a_stalled_block_reader(runtime: Runtime) -> None:
    agent, stalled, healthy = stalled_run(runtime)
    assert agent.state().is_running  # held by the stalled reader
    assert agent.abort("user_abort")
    agent.wait_for_idle(timeout=5)  # before: until the stalled reader's block_timeout
    ends = [e for e in healthy.until_end(timeout=5) if is_terminal(e)]
    assert [(type(e), e.reason) for e in ends] == [(Canceled, "user_abort")]  # type: ignore[union-attr]
    seen = list(stalled.until_end(timeout=5))
    # Its two events, then the gap the abort left (one marker), then the run's terminal.
    assert [type(e) for e in seen[2:]] == [EventsDropped, Canceled]
    marker = seen[2]
    assert isinstance(marker, EventsDropped) and marker.count == stalled.stream.stats().dropped


def test_a_stop_ends_a_run_that_waits_for_a_stalled_block_reader_as_stopping(
    make_runtime: Callable[..., Runtime],
) -> None:
    runtime = make_runtime()
    _, _, healthy = stalled_run(runtime)
    runtime.stop(timeout=30)
    events = list(healthy)
    assert events[-1].type == "canceled" and events[-1].reason == "runtime_stopping"  # type: ignore[union-attr]
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs)


def test_abort_of_an_idle_agent_returns_false(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel([]))
    assert agent.abort() is False
    assert not any(isinstance(e, (ToolExecutionStart, Canceled)) for e in [])


def test_state_shows_the_answer_as_it_streams_whether_or_not_anyone_listens(
    runtime: Runtime,
) -> None:
    pieces = ["one ", "two ", "three"]
    gates = [threading.Event() for _ in pieces]

    def stream(_request: object) -> Iterator[str]:
        for piece, gate in zip(pieces, gates, strict=True):
            yield piece
            gate.wait(5)

    agent = runtime.start_agent(("s", "main", 0), model=FunctionModel(stream))

    def streaming_text() -> str | None:
        message = agent.state().stream_message
        return None if message is None else message.text

    agent.prompt("go")  # nobody listens: the tokens make no events, state() still sees them
    wait_until(lambda: streaming_text() == "one ", what="the first token")
    gates[0].set()
    wait_until(lambda: streaming_text() == "one two ", what="the second token")
    with agent.subscribe() as sub:  # from here on the tokens are events too
        gates[1].set()
        wait_until(lambda: streaming_text() == "one two three", what="the third token")
        gates[2].set()
        seen = list(sub.until_end(timeout=5))
    assert agent.state().stream_message is None
    updates = [e for e in seen if isinstance(e, MessageUpdate)]
    assert [(u.delta.delta, u.message.text) for u in updates] == [("three", "one two three")]
    seqs = [e.seq for e in seen]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # gap-free from where it joined
