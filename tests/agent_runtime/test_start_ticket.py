"""An idle agent's start ticket: a prompt to an idle agent starts its run without waiting for
the actor's answer, exactly one of concurrent prompts wins, and a start that loses a race with
the runtime's stop still ends its run for every reader."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_runtime import AgentBusy, AgentStopped, Runtime
from agent_runtime.agent import _actor, _driver, _shell
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.events import AgentEnd, Canceled, Event
from agent_runtime.memory import MemoryPolicy
from agent_runtime.messages import UserMessage
from agent_runtime.templates import Template, TemplateError
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from supervisors._actor import actor_of


@pytest.fixture
def runtime() -> Iterator[Runtime]:
    with Runtime.start(RuntimeConfig(memory=MemoryConfig(store="memory"))) as rt:
        yield rt


class Gate:
    """Holds the actor in its handler `name` until opened (`arrived` is set when it waits);
    then the handler runs, or raises `crash`."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        name: str = "_on_start_reserved",
        crash: Exception | None = None,
    ) -> None:
        self.arrived = threading.Event()
        self.opened = threading.Event()
        original = getattr(_actor.AgentActor, name)

        def gated(actor: Any, *args: Any) -> Any:
            self.arrived.set()
            assert self.opened.wait(10), "the test never opened the gate"
            if crash is not None:
                raise crash
            return original(actor, *args)

        monkeypatch.setattr(_actor.AgentActor, name, gated)


def in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    """`call()` on a thread of its own; the list gets what it raised."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            raised.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    return runner, raised


def run_in_thread(agent: Any) -> tuple[threading.Thread, list[BaseException]]:
    """`agent.run("hi")` on a thread of its own; the list gets what it raised."""
    return in_thread(lambda: agent.run("hi", timeout=10))


def test_a_prompt_to_an_idle_agent_returns_before_its_actor_takes_the_start(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(monkeypatch)
    agent = runtime.start_agent(("s", "a", 0), model=ScriptedModel(["hello"]))
    sub = agent.subscribe()
    started = time.monotonic()
    run_id = agent.prompt("hi")
    assert time.monotonic() - started < 1.0  # the actor is held at the gate for up to 10 s
    assert gate.arrived.wait(5)
    # no ticket now: it asks the actor, which takes the first start first
    other, refused = in_thread(lambda: agent.prompt("again"))
    gate.opened.set()
    other.join(10)
    assert len(refused) == 1 and isinstance(refused[0], AgentBusy)
    assert refused[0].run_id == run_id
    events = list(sub.until_end(timeout=10, run_id=run_id))
    assert isinstance(events[-1], AgentEnd) and events[-1].run_id == run_id
    assert events[0].run_id == run_id


def race(threads: int, prompt: Callable[[int], str]) -> list[str]:
    """`prompt(i)` from `threads` threads at once: each run id, or "busy"."""
    barrier = threading.Barrier(threads)
    outcomes: list[str] = []
    lock = threading.Lock()

    def racer(i: int) -> None:
        barrier.wait(5)
        try:
            result = prompt(i)
        except AgentBusy:
            result = "busy"
        with lock:
            outcomes.append(result)

    racers = [threading.Thread(target=racer, args=(i,)) for i in range(threads)]
    for t in racers:
        t.start()
    for t in racers:
        t.join(10)
    return outcomes


def test_of_concurrent_prompts_to_an_idle_agent_exactly_one_starts(runtime: Runtime) -> None:
    rounds, threads = 20, 6
    # Each run streams for 0.2 s, long after the last racer tried: one start per round.
    turns = [ScriptedTurn(chunks=["o", "k"], chunk_delay=0.1) for _ in range(rounds)]
    agent = runtime.start_agent(
        ("s", "a", 0), model=ScriptedModel(turns), memory=MemoryPolicy.none()
    )
    for round_number in range(rounds):
        outcomes = race(threads, lambda i, r=round_number: agent.prompt(f"round {r} from {i}"))
        started = [o for o in outcomes if o != "busy"]
        assert len(outcomes) == threads and len(started) == 1, outcomes
        agent.wait_for_idle(10)
    prompts = [m for m in agent.state().messages if isinstance(m, UserMessage)]
    assert len(prompts) == rounds


def test_a_reserved_start_that_loses_the_race_with_stop_ends_its_run_for_every_reader(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(monkeypatch)
    agent = runtime.start_agent(("s", "a", 0), model=ScriptedModel(["hello"]))
    sub = agent.subscribe()
    runner, raised = run_in_thread(agent)
    assert gate.arrived.wait(5)
    stopper = threading.Thread(target=runtime.stop)
    stopper.start()
    wait_until(lambda: runtime.stopping, what="the runtime is stopping")
    gate.opened.set()
    runner.join(10)
    stopper.join(15)
    assert len(raised) == 1 and isinstance(raised[0], AgentStopped), raised
    ends = [e for e in sub if isinstance(e, Canceled)]
    assert len(ends) == 1 and ends[0].reason.startswith("not_started: AgentStopped")


def test_an_agent_with_a_template_prompt_still_raises_a_render_error_at_the_call(
    runtime: Runtime,
) -> None:
    agent = runtime.start_agent(
        ("s", "a", 0), model=ScriptedModel(["x"]), system_prompt=Template("no-such-template")
    )
    with pytest.raises(Exception, match="no-such-template"):
        agent.prompt("hi")
    assert agent.state().is_running is False


def quietly(call: Callable[[], Any]) -> Callable[[], None]:
    def called() -> None:
        with contextlib.suppress(Exception):
            call()

    return called


def test_a_reserved_start_queued_behind_a_crash_fails_its_run_instead_of_hanging(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(monkeypatch, "_on_state", crash=RuntimeError("boom in state"))
    agent = runtime.start_agent(("s", "a", 0), model=ScriptedModel(["x"] * 5), restart="transient")
    sub = agent.subscribe()
    crashed = agent.ref
    threading.Thread(target=quietly(agent.state), daemon=True).start()  # it crashes the actor
    assert gate.arrived.wait(5)
    runner, raised = run_in_thread(agent)  # reserves; its start queues behind state()
    wait_until(lambda: agent._shell.reserved is not None, what="the start is reserved")
    gate.opened.set()  # the crash drops the queued start with the actor's mailbox
    runner.join(10)
    assert not runner.is_alive() and len(raised) == 1 and isinstance(raised[0], AgentStopped)
    wait_until(lambda: agent.alive and agent.ref is not crashed, what="the agent restarted")
    monkeypatch.undo()
    ends = [e for e in sub.until_end(timeout=5) if isinstance(e, Canceled)]
    assert [e.reason for e in ends] == [f"not_started: AgentStopped: {AgentStopped(agent.key)}"]
    assert isinstance(agent.run("again", timeout=10).text, str)  # the next start is fine


def test_a_reserved_start_queued_behind_a_stop_fails_its_run_instead_of_hanging(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(monkeypatch, "_on_state")
    agent = runtime.start_agent(("s", "a", 0), model=ScriptedModel(["x"] * 5))
    sub = agent.subscribe()
    inbox = actor_of(agent.ref).actor_inbox
    threading.Thread(target=agent.state, daemon=True).start()
    assert gate.arrived.wait(5)
    stopper = threading.Thread(target=agent.stop, daemon=True)
    stopper.start()
    wait_until(lambda: inbox.qsize() >= 1, what="the stop is queued")
    runner, raised = run_in_thread(agent)  # reserves: the agent has not ended yet
    wait_until(lambda: inbox.qsize() >= 2, what="the reserved start is queued behind it")
    gate.opened.set()  # the stop drops the queued start with the actor's mailbox
    runner.join(10)
    stopper.join(10)
    assert not runner.is_alive() and len(raised) == 1 and isinstance(raised[0], AgentStopped)
    ends = [e for e in sub if isinstance(e, Canceled)]  # then the subscription closes
    assert [e.reason for e in ends] == [f"not_started: AgentStopped: {AgentStopped(agent.key)}"]


def test_abort_on_the_loop_right_after_astream_reports_the_run_it_aborts() -> None:
    async def main() -> tuple[bool, Event | None]:
        async with Runtime.astart(RuntimeConfig(memory=MemoryConfig(store="memory"))) as rt:
            turn = ScriptedTurn(chunks=["a"] * 20, chunk_delay=0.05)
            agent = await rt.astart_agent(("s", "a", 0), model=ScriptedModel([turn]))
            await agent.await_idle()
            events = agent.astream("hi")  # reserved: the actor may not have it yet
            aborted = agent.abort("x")
            terminal = None
            async for event in events:
                terminal = event
            return aborted, terminal

    aborted, terminal = asyncio.run(main())
    assert isinstance(terminal, Canceled) and terminal.reason == "x"
    assert aborted is True


def test_a_prompt_right_after_run_returns_does_not_wait_for_the_actor_to_handle_that_end(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(monkeypatch, "_fact_facts")  # a text run tells its actor once: at its end
    agent = runtime.start_agent(
        ("s", "a", 0), model=ScriptedModel(["first", "second"]), memory=MemoryPolicy.none()
    )
    sub = agent.subscribe()
    assert agent.run("one", timeout=10).text == "first"
    assert gate.arrived.wait(5)  # the actor is held before it handles the end
    started = time.monotonic()
    run_id = agent.prompt("two")  # the driver offered the ticket with the end
    assert time.monotonic() - started < 1.0  # the actor is held at the gate for up to 10 s
    gate.opened.set()
    events = list(sub.until_end(timeout=10, run_id=run_id))
    assert isinstance(events[-1], AgentEnd) and events[-1].run_id == run_id
    texts = [m.text for m in agent.state().messages]
    assert texts == ["one", "first", "two", "second"]


def test_a_run_that_ends_before_its_actor_is_done_starting_it_still_offers_the_ticket(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a busy machine a short run can end while its actor is still finishing its start
    # (it marks the reservation arrived last); the ticket offered with the end must survive.
    returned = threading.Event()
    arrived = _shell.AgentShell.reservation_arrived

    def late(shell: _shell.AgentShell, run_id: str) -> None:
        returned.wait(5)  # until the test's run() has returned
        arrived(shell, run_id)

    monkeypatch.setattr(_shell.AgentShell, "reservation_arrived", late)
    gate = Gate(monkeypatch, "_fact_facts")  # then the actor is held at the run's end
    agent = runtime.start_agent(
        ("s", "a", 0), model=ScriptedModel(["first", "second"]), memory=MemoryPolicy.none()
    )
    sub = agent.subscribe()
    assert agent.run("one", timeout=10).text == "first"
    returned.set()
    assert gate.arrived.wait(5)
    started = time.monotonic()
    run_id = agent.prompt("two")
    assert time.monotonic() - started < 1.0  # the actor is held at the gate for up to 10 s
    gate.opened.set()
    events = list(sub.until_end(timeout=10, run_id=run_id))
    assert isinstance(events[-1], AgentEnd) and events[-1].run_id == run_id
    assert [m.text for m in agent.state().messages] == ["one", "first", "two", "second"]


def test_a_follow_up_that_comes_too_late_for_a_run_starts_the_next_before_a_later_prompt(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The actor is slow: it handles a follow-up after the run's driver offered the ticket
    # with the run's end, then the end itself. The follow-up still starts the next run and
    # a prompt made after follow_up() returned finds the agent busy (no ticket was left).
    offered = threading.Event()
    offer = _shell.AgentShell.offer_start_after

    def offer_then_tell(shell: _shell.AgentShell, view: Any, started_by: Any) -> None:
        offer(shell, view, started_by)
        offered.set()

    monkeypatch.setattr(_shell.AgentShell, "offer_start_after", offer_then_tell)
    follow_up = _actor.AgentActor._on_follow_up

    def late_follow_up(actor: Any, queued: Any) -> None:
        assert offered.wait(5)
        follow_up(actor, queued)

    monkeypatch.setattr(_actor.AgentActor, "_on_follow_up", late_follow_up)
    gate = Gate(monkeypatch, "_fact_facts")  # the run's one batch of facts: its end
    model = ScriptedModel([ScriptedTurn(text="first", delay=0.3), "second", "third"])
    agent = runtime.start_agent(("s", "a", 0), model=model, memory=MemoryPolicy.none())
    sub = agent.subscribe()
    agent.prompt("one")
    agent.follow_up("x")  # answered once the run has ended and its driver offered the ticket
    assert gate.arrived.wait(5)
    assert agent._shell.reserve_start("probe") is False  # the follow-up withdrew it
    gate.opened.set()
    ends = [e for e in sub.until_end(timeout=10) if isinstance(e, AgentEnd)]
    ends += [e for e in sub.until_end(timeout=10) if isinstance(e, AgentEnd)]
    assert len(ends) == 2
    assert [m.text for m in agent.state().messages] == ["one", "first", "x", "second"]


def test_after_a_run_an_agent_with_a_template_prompt_still_asks_its_actor(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime.templates.init("greeting", "be brief")
    agent = runtime.start_agent(
        ("s", "a", 0), model=ScriptedModel(["first", "second"]), system_prompt=Template("greeting")
    )
    gate = Gate(monkeypatch, "_fact_facts")
    assert agent.run("one", timeout=10).text == "first"
    assert gate.arrived.wait(5)
    assert agent._shell.reserve_start("probe") is False  # no ticket: a render may fail
    gate.opened.set()
    assert agent.run("two", timeout=10).text == "second"


def test_a_prompt_after_set_system_prompt_of_a_template_never_takes_a_ticket(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The actor answers the setter, then is slow to look at the ticket again: a prompt made
    # after set_system_prompt returned must still be checked by the actor (and fail there).
    prompted = threading.Event()
    offer_start = _actor.AgentActor._offer_start

    def slow_offer_start(actor: Any) -> None:
        prompted.wait(1)  # bounded: with the fix the prompt waits for this actor
        offer_start(actor)

    agent = runtime.start_agent(
        ("s", "a", 0), model=ScriptedModel(["first", "second"]), memory=MemoryPolicy.none()
    )
    assert agent.run("one", timeout=10).text == "first"
    monkeypatch.setattr(_actor.AgentActor, "_offer_start", slow_offer_start)
    agent.set_system_prompt(Template("missing"))
    try:
        with pytest.raises(TemplateError, match="missing"):
            agent.prompt("two")
    finally:
        prompted.set()


def test_a_driver_slow_to_settle_offers_no_ticket_once_its_actor_started_another_run(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    b_running = threading.Event()
    settling: list[str] = []
    original = _driver.RunDriver._settle

    def slow_settle(driver: Any) -> None:
        if not settling:  # run A's driver: its end is handled by the actor, then B starts
            settling.append(driver.view.run_id)
            assert b_running.wait(10)
        original(driver)

    monkeypatch.setattr(_driver.RunDriver, "_settle", slow_settle)
    agent = runtime.start_agent(
        ("s", "a", 0),
        model=ScriptedModel(["first", ScriptedTurn(text="second", delay=0.5)]),
        memory=MemoryPolicy.none(),
    )

    def other_caller() -> None:
        wait_until(lambda: settling and agent._shell.status.run_id is None, what="A's end handled")
        b = agent.prompt("b")
        wait_until(lambda: agent.state().run_id == b, what="the actor runs B")
        b_running.set()

    caller = threading.Thread(target=other_caller)
    caller.start()
    assert agent.run("one", timeout=10).text == "first"
    caller.join(10)
    with pytest.raises(AgentBusy):  # no ticket from A's driver: the busy actor answers
        agent.prompt("two")
    agent.wait_for_idle(10)
    assert [m.text for m in agent.state().messages] == ["one", "first", "b", "second"]
