"""An idle agent's start ticket: a prompt to an idle agent starts its run without waiting for
the actor's answer, exactly one of concurrent prompts wins, and a start that loses a race with
the runtime's stop still ends its run for every reader."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_runtime import AgentBusy, AgentStopped, Runtime
from agent_runtime.agent import _actor
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.events import AgentEnd, Canceled
from agent_runtime.memory import MemoryPolicy
from agent_runtime.messages import UserMessage
from agent_runtime.templates import Template
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until


@pytest.fixture
def runtime() -> Iterator[Runtime]:
    with Runtime.start(RuntimeConfig(memory=MemoryConfig(store="memory"))) as rt:
        yield rt


class Gate:
    """Holds the actor at the reserved start until opened (`arrived` is set when it waits)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.arrived = threading.Event()
        self.opened = threading.Event()
        original = _actor.AgentActor._on_start_reserved

        def gated(actor: Any, *args: Any) -> str:
            self.arrived.set()
            assert self.opened.wait(10), "the test never opened the gate"
            return original(actor, *args)

        monkeypatch.setattr(_actor.AgentActor, "_on_start_reserved", gated)


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
    refused: list[BaseException] = []

    def second() -> None:  # no ticket now: it asks the actor, which takes the first start first
        try:
            agent.prompt("again")
        except BaseException as exc:
            refused.append(exc)

    other = threading.Thread(target=second)
    other.start()
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
    raised: list[BaseException] = []

    def run() -> None:
        try:
            agent.run("hi", timeout=10)
        except BaseException as exc:
            raised.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
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
