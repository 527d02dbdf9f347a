"""Runs that fall due together on one event loop take its iterations in turn: other work on
the loop (a host's requests, its timers) runs between them, not after all of them."""

from __future__ import annotations

import asyncio

import pytest

from agent_runtime import Agent, Runtime
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
                async with stream:
                    async for _ in stream:
                        pass
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
            async with streams[-1] as events:
                terminal = [event async for event in events if is_terminal(event)]
            called_when_it_ended = len(calls)
            for stream in streams[:-1]:
                async with stream:
                    async for _ in stream:
                        pass
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
            ends: list[list[Event]] = []
            for stream in streams:
                async with stream as events:
                    ends.append([event async for event in events if is_terminal(event)])
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
        ends: list[list[str]] = []
        for stream in streams:
            async with stream as events:
                ends.append([event.type async for event in events if is_terminal(event)])
        await stopping
        return ends

    ends = asyncio.run(asyncio.wait_for(main(), 60))
    assert len(ends) == RUNS
    assert all(len(end) == 1 for end in ends), ends
    assert {end[0] for end in ends} <= {"agent_end", "canceled"}
