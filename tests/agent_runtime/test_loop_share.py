"""Runs that fall due together on one event loop take its iterations in turn: other work on
the loop (a host's requests, its timers) runs between them, not after all of them."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from agent_runtime import Agent, RunEvents, Runtime
from agent_runtime.abort import AbortSignal
from agent_runtime.agent import _loop_share
from agent_runtime.agent._loop_share import LoopShare, loop_share
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.events import Canceled, Event, is_terminal
from agent_runtime.llm import ChatRequest
from agent_runtime.memory import MemoryPolicy
from agent_runtime.messages import ToolCall, ToolResultMessage
from agent_runtime.testing import FunctionModel, ScriptedTurn
from agent_runtime.tools import tool

CONFIG = RuntimeConfig(memory=MemoryConfig(store="memory"))
RUNS = 200  # each run's first step takes well over 5 us: far more than one 1 ms slice


def recording_model(calls: list[str], name: str) -> FunctionModel:
    async def answer(request: ChatRequest) -> str:
        calls.append(name)
        return "done"

    return FunctionModel(answer, record_requests=False)


async def started_agents(runtime: Runtime, calls: list[str]) -> list[Agent]:
    return [
        await runtime.astart_agent(
            (f"s{i}", "a", 0), model=recording_model(calls, f"run{i}"), memory=MemoryPolicy.none()
        )
        for i in range(RUNS)
    ]


async def terminals(stream: RunEvents) -> list[Event]:
    """Read `stream` to its end; its terminal events."""
    async with stream as events:
        return [event async for event in events if is_terminal(event)]


@pytest.mark.timing  # the slice is time: it relies on 200 runs' steps taking over 1 ms
def test_the_hosts_next_callback_runs_before_most_runs_of_a_burst_call_their_model() -> None:
    async def main() -> None:
        calls: list[str] = []
        async with Runtime.astart(CONFIG) as runtime:
            agents = await started_agents(runtime, calls)
            streams = [agent.astream("hi") for agent in agents]
            loop = asyncio.get_running_loop()
            loop.call_soon(calls.append, "host")  # the host's next callback, after the burst
            for stream in streams:
                await terminals(stream)
        runs = [name for name in calls if name != "host"]
        assert runs == [f"run{i}" for i in range(RUNS)]  # in the order they started
        # Before runs took the loop in turn, all 200 first model calls came first.
        assert calls.index("host") < RUNS // 2, calls.index("host")

    asyncio.run(main())


@pytest.mark.timing
def test_an_aborted_run_does_not_wait_for_its_turn_behind_a_burst() -> None:
    async def main() -> None:
        calls: list[str] = []
        async with Runtime.astart(CONFIG) as runtime:
            agents = await started_agents(runtime, calls)
            streams = [agent.astream("hi") for agent in agents]
            last = agents[-1]
            last.abort("changed my mind")
            terminal = await terminals(streams[-1])
            called_when_it_ended = len(calls)
            for stream in streams[:-1]:
                await terminals(stream)
        assert isinstance(terminal[0], Canceled) and terminal[0].reason == "changed my mind"
        assert f"run{RUNS - 1}" not in calls
        assert len(calls) == RUNS - 1
        # It ended while most runs started before it still waited for their first model call.
        assert called_when_it_ended < RUNS // 2, called_when_it_ended

    asyncio.run(main())


def test_every_run_of_a_burst_completes_and_later_turns_go_on_after_it() -> None:
    # Two turns per run (a tool call, then text): a turn after the first asks for its share
    # again, and every run still completes.
    @tool
    async def echo(text: str) -> str:
        """Echo."""
        return text

    async def answer(request: ChatRequest) -> ScriptedTurn | str:
        if isinstance(request.messages[-1], ToolResultMessage):
            return "done"
        return ScriptedTurn(tool_calls=[ToolCall(id="c1", name="echo", arguments={"text": "x"})])

    async def main() -> list[str]:
        async with Runtime.astart(CONFIG) as runtime:
            agents = [
                await runtime.astart_agent(
                    (f"t{i}", "a", 0),
                    model=FunctionModel(answer, record_requests=False),
                    tools=[echo],
                    memory=MemoryPolicy.none(),
                )
                for i in range(RUNS)
            ]
            results = await asyncio.gather(*(agent.arun("hi", timeout=60) for agent in agents))
            return [result.text for result in results]

    assert asyncio.run(main()) == ["done"] * RUNS


def test_runs_aborted_as_they_start_end_canceled_without_calling_their_model() -> None:
    async def main() -> tuple[list[list[Event]], list[str]]:
        calls: list[str] = []
        async with Runtime.astart(CONFIG) as runtime:
            agents = await started_agents(runtime, calls)
            streams = [agent.astream("hi") for agent in agents]
            for agent in agents:  # before any of them took its first step
                agent.abort("stop all")
            ends = [await terminals(stream) for stream in streams]
        return ends, calls

    ends, calls = asyncio.run(asyncio.wait_for(main(), 60))
    assert calls == []
    assert all(len(end) == 1 for end in ends)
    assert all(isinstance(end[0], Canceled) and end[0].reason == "stop all" for end in ends)


def test_a_runtime_stopped_during_a_burst_ends_every_run_with_one_terminal() -> None:
    async def main() -> list[list[str]]:
        calls: list[str] = []
        runtime = await Runtime.astart(CONFIG)
        agents = await started_agents(runtime, calls)
        streams = [agent.astream("hi") for agent in agents]
        stopping = asyncio.ensure_future(runtime.astop())  # runs may still wait for their turn
        ends: list[list[str]] = [[e.type for e in await terminals(stream)] for stream in streams]
        await stopping
        return ends

    ends = asyncio.run(asyncio.wait_for(main(), 60))
    assert len(ends) == RUNS
    assert all(len(end) == 1 for end in ends), ends
    assert {end[0] for end in ends} <= {"agent_end", "canceled"}


def test_the_runtimes_stats_count_the_waits_of_a_burst_and_none_of_a_lone_run() -> None:
    async def main() -> tuple[int, float, int]:
        calls: list[str] = []
        async with Runtime.astart(CONFIG) as runtime:
            agents = await started_agents(runtime, calls)
            assert runtime.stats().loop_waits == 0
            await asyncio.gather(*(terminals(agent.astream("hi")) for agent in agents))
            burst = runtime.stats()
            await agents[0].arun("again", timeout=30)  # alone on the loop: its turn is now
            return burst.loop_waits, burst.loop_wait_seconds, runtime.stats().loop_waits

    waits, seconds, after_lone_run = asyncio.run(asyncio.wait_for(main(), 60))
    assert 0 < waits < RUNS  # the first run of the burst never waits; one wait per later one
    assert seconds > 0
    assert after_lone_run == waits


class Clock:
    """`time` for the share: `perf_counter` returns what the test sets."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(_loop_share, "time", clock)
    return clock


def test_waiting_runs_go_on_in_the_order_they_asked_at_least_one_per_iteration(
    clock: Clock,
) -> None:
    async def main() -> list[list[int]]:
        share = LoopShare()
        assert share.admit() is None  # the slice's first step
        clock.now = 0.002  # the slice is spent
        turns = [share.admit() for _ in range(6)]
        assert all(turn is not None for turn in turns)
        assert share.admit() is not None  # a later one queues behind them
        went: list[list[int]] = []
        for _ in range(4):
            await asyncio.sleep(0)  # one iteration of the loop
            went.append([i for i, turn in enumerate(turns) if turn is not None and turn.done()])
            clock.now += 0.0025  # each iteration's steps take 2.5 slices
        return went

    went = asyncio.run(main())
    assert went[0] == [0]  # as many as went on in the spent slice: one
    assert went[1] == [0, 1]  # steps that overran the slice: still one
    assert went[2] == [0, 1, 2]
    assert went[3] == [0, 1, 2, 3]


def test_an_iteration_lets_more_through_while_their_steps_fit_the_slice(clock: Clock) -> None:
    async def main() -> list[int]:
        share = LoopShare()
        assert share.admit() is None
        clock.now = 0.002
        turns = [share.admit() for _ in range(40)]
        counts = []
        for _ in range(5):
            await asyncio.sleep(0)
            counts.append(sum(turn is not None and turn.done() for turn in turns))
        return counts

    # steps that take no time: the grant doubles each iteration (1, 2, 4, 8, 16)
    assert asyncio.run(main()) == [1, 3, 7, 15, 31]


def test_an_abort_ends_a_wait_before_its_turn(clock: Clock) -> None:
    async def main() -> tuple[bool, bool, bool]:
        share = LoopShare()
        assert share.admit() is None
        clock.now = 0.002
        signal = AbortSignal()
        first, second, aborted = share.admit(), share.admit(), share.admit(signal)
        assert first is not None and second is not None and aborted is not None
        signal.abort("no")
        await asyncio.sleep(0)
        return first.done(), second.done(), aborted.done()

    assert asyncio.run(main()) == (True, False, True)


def test_a_share_keeps_no_event_loop_alive() -> None:
    async def ask() -> weakref.ref[asyncio.AbstractEventLoop]:
        loop = asyncio.get_running_loop()
        loop_share(loop).admit()
        return weakref.ref(loop)

    ended = asyncio.run(ask())
    # A loop closed while runs waited (their tasks abandoned with it) goes at the next
    # loop's first run.
    stranded = asyncio.new_event_loop()

    async def strand() -> None:
        share = loop_share(asyncio.get_running_loop())
        share.admit()
        while share.admit() is None:  # spend the slice
            pass

    stranded.run_until_complete(strand())
    stranded.close()
    closed = weakref.ref(stranded)
    del stranded
    asyncio.run(ask())
    gc.collect()
    assert ended() is None
    assert closed() is None
