"""Starting runs, seen from the outside: exactly one of concurrent prompts wins, a prompt
right after a run's end is taken at once, a start racing the agent's stop fails instead of
hanging, and an abort right after `astream` on the agent's loop aborts that run."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from agent_runtime import AgentBusy, AgentStopped, Runtime
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.events import AgentEnd, Canceled, Event
from agent_runtime.memory import MemoryPolicy
from agent_runtime.messages import UserMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn


@pytest.fixture
def runtime(make_runtime: Callable[..., Runtime]) -> Runtime:
    return make_runtime(memory=MemoryConfig(store="memory"))


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


def test_a_prompt_right_after_run_returns_is_taken(runtime: Runtime) -> None:
    agent = runtime.start_agent(
        ("s", "a", 0), model=ScriptedModel(["r"] * 200), memory=MemoryPolicy.none()
    )
    for i in range(100):  # never AgentBusy: run() returns once the agent takes a new prompt
        assert agent.run(f"p{i}", timeout=10).text == "r"
        assert agent.prompt(f"q{i}")
        agent.wait_for_idle(10)
    assert len(agent.state().messages) == 400


def test_runs_racing_a_stop_end_or_fail_and_never_hang(runtime: Runtime) -> None:
    for index in range(20):
        agent = runtime.start_agent(("s", "a", index), model=ScriptedModel(["x"] * 5))
        sub = agent.subscribe()
        outcomes: list[object] = []

        def run(agent: object = agent, outcomes: list[object] = outcomes) -> None:
            try:
                outcomes.append(agent.run("hi", timeout=10))  # type: ignore[attr-defined]
            except BaseException as exc:
                outcomes.append(exc)

        runner = threading.Thread(target=run)
        runner.start()
        agent.stop()
        runner.join(10)
        assert not runner.is_alive()
        (outcome,) = outcomes
        assert (
            not isinstance(outcome, BaseException)
            or isinstance(outcome, AgentStopped | AgentBusy)
            or type(outcome).__name__ == "RunCanceled"
        ), outcome
        ends = [e for e in sub if isinstance(e, AgentEnd | Canceled)]  # then it closes
        assert len(ends) <= 1


def test_abort_on_the_loop_right_after_astream_aborts_that_run() -> None:
    async def main() -> tuple[bool, Event | None]:
        async with Runtime.astart(RuntimeConfig(memory=MemoryConfig(store="memory"))) as rt:
            turn = ScriptedTurn(chunks=["a"] * 20, chunk_delay=0.05)
            agent = await rt.astart_agent(("s", "a", 0), model=ScriptedModel([turn]))
            await agent.await_idle()
            events = agent.astream("hi")
            aborted = agent.abort("x")
            terminal = None
            async for event in events:
                terminal = event
            return aborted, terminal

    aborted, terminal = asyncio.run(main())
    assert isinstance(terminal, Canceled) and terminal.reason == "x"
    assert aborted is True


def test_a_start_on_the_agents_loop_is_taken_in_place() -> None:
    async def main() -> list[Event]:
        async with Runtime.astart(RuntimeConfig(memory=MemoryConfig(store="memory"))) as rt:
            agent = await rt.astart_agent(("s", "a", 0), model=ScriptedModel(["one", "two"]))
            run_id = agent.prompt("hi")  # on the loop: answered without waiting
            assert agent.state().run_id == run_id
            with pytest.raises(AgentBusy):
                agent.prompt("again")
            await agent.await_idle(10)
            return [e async for e in agent.astream("more")]

    events = asyncio.run(main())
    assert isinstance(events[-1], AgentEnd)
