"""A run's objects, and a stopped agent's, are freed by reference counting, never left to
the cyclic collector.

A reference cycle in a run's objects makes every run garbage that only `gc` frees: in a
server that is a young collection every few turns, and full collections that pause the host's
event loop for tens of milliseconds (one back-reference from a run's approvals to the run
cost 39 such objects per text turn, 7-10% of its CPU). The same holds for the agents a server
starts and stops, one per session (34 objects per stopped agent before the handle and its cell
let go of each other).
"""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from agent_runtime import Agent, Runtime, delegate
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.messages import ToolCall
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import Tool, ToolContext, tool
from supervisors import kill

ROUNDS = 3  # after one round that warms what is made once (caches, loggers, pools)


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


@tool
def broken(key: str) -> str:
    """Fail."""
    raise ValueError(f"no {key}")


@tool(requires_approval=True)
def send(to: str) -> str:
    """Send."""
    return f"sent to {to}"


@tool
async def slow(ctx: ToolContext) -> str:
    """Wait until aborted."""
    await ctx.signal.wait_async()
    return "never"


def call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=f"c-{name}", name=name, arguments=arguments)


@pytest.fixture
def garbage_after() -> Iterator[Callable[[Callable[[], None]], Counter[str]]]:
    """Run an action with the collector off; what a collection then finds (by type)."""

    def collect(action: Callable[[], None]) -> Counter[str]:
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            action()
            gc.collect()
            return Counter(type(o).__qualname__ for o in gc.garbage)
        finally:
            gc.garbage.clear()
            gc.set_debug(0)
            gc.enable()

    yield collect


def agent_with(runtime: Runtime, turns: list[ScriptedTurn | str], tools: list[Tool]) -> Agent:
    model = ScriptedModel(turns * (ROUNDS + 1), record_requests=False)
    return runtime.start_agent(("gc", "a", 0), model=model, tools=tools)


def rounds(action: Callable[[], None]) -> Callable[[], None]:
    def repeated() -> None:
        for _ in range(ROUNDS):
            action()

    return repeated


Scenario = tuple[list[ScriptedTurn | str], list[Tool], Callable[[Agent], None]]


def _text(agent: Agent) -> None:
    assert agent.run("hi", timeout=10).text == "done"


def _streamed(agent: Agent) -> None:
    with agent.subscribe() as sub:
        agent.prompt("hi")
        assert [e.type for e in sub.until_end(timeout=10)][-1] == "agent_end"
    agent.wait_for_idle(timeout=10)


def _aborted(agent: Agent) -> None:
    with agent.subscribe() as sub:
        agent.prompt("hi")
        for event in sub.until_end(timeout=10):
            if event.type == "tool_execution_start":
                agent.abort()
            if event.type in ("agent_end", "canceled", "error"):
                assert event.type == "canceled"
                break
    agent.wait_for_idle(timeout=10)


def _steered(agent: Agent) -> None:
    steered = False
    with agent.subscribe() as sub:
        agent.prompt("hi")
        for event in sub.until_end(timeout=10):
            if event.type == "tool_execution_start" and not steered:
                steered = True
                agent.steer("also this")
                agent.follow_up("and then this")
            if event.type in ("agent_end", "canceled", "error"):
                assert event.type == "agent_end"
                break
    agent.wait_for_idle(timeout=10)


def _approved(agent: Agent) -> None:
    agent.prompt("hi")
    wait_until(lambda: bool(agent.state().pending_approvals), what="the call waits")
    agent.approve(agent.state().pending_approvals[0].tool_call_id, by="alice")
    agent.wait_for_idle(timeout=10)


SCENARIOS: dict[str, Scenario] = {
    "text": (["done"], [], _text),
    "tool call": ([ScriptedTurn(tool_calls=[call("lookup", key="k")]), "done"], [lookup], _text),
    "failing tool": ([ScriptedTurn(tool_calls=[call("broken", key="k")]), "done"], [broken], _text),
    "streamed": ([ScriptedTurn(chunks=["a"] * 20), "done"], [], _streamed),
    "aborted in a tool": ([ScriptedTurn(tool_calls=[call("slow")])], [slow], _aborted),
    "steered": (
        [ScriptedTurn(tool_calls=[call("lookup", key="k")]), "seen", "followed"],
        [lookup],
        _steered,
    ),
    "approved": ([ScriptedTurn(tool_calls=[call("send", to="bob")]), "done"], [send], _approved),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_run_leaves_nothing_for_the_cyclic_collector(
    name: str,
    runtime: Runtime,
    garbage_after: Callable[[Callable[[], None]], Counter[str]],
) -> None:
    turns, tools, action = SCENARIOS[name]
    agent = agent_with(runtime, turns, tools)
    action(agent)  # warm
    assert garbage_after(rounds(lambda: action(agent))) == Counter()


def test_a_run_awaited_on_the_runtimes_loop_leaves_nothing_for_the_cyclic_collector(
    garbage_after: Callable[[Callable[[], None]], Counter[str]],
) -> None:
    async def runs(count: int) -> None:
        model = ScriptedModel(["done"] * (count + 1), record_requests=False)
        config = RuntimeConfig(memory=MemoryConfig(store="memory"))
        async with Runtime.astart(config) as rt:
            agent = await rt.astart_agent(("gc", "a", 0), model=model)
            for _ in range(count):
                assert (await agent.arun("hi")).text == "done"
            await agent.astop()

    asyncio.run(runs(1))  # warm
    garbage = garbage_after(lambda: asyncio.run(runs(ROUNDS)))
    # What a runtime's whole life leaves: the agent's handle and its cell (one cycle per
    # agent, not per run) and what asyncio.run itself leaves; nothing of the runs.
    assert not {"AgentRun", "RunApprovals", "RunTranscript", "AssistantMessage"} & set(garbage)


def _stopped(runtime: Runtime, i: int) -> None:
    agent = runtime.start_agent(("gc", "plain", i), model=ScriptedModel(["done"]))
    assert agent.run("hi", timeout=10).text == "done"
    agent.stop()


WORKER = delegate(model=ScriptedModel(["found"] * (ROUNDS + 1)))  # a tool is made once


def _stopped_with_a_subagent(runtime: Runtime, i: int) -> None:
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[call("delegate", role="worker", task="t")]), "done"]
    )
    agent = runtime.start_agent(("gc", "parent", i), model=model, tools=[WORKER])
    assert agent.run("hi", timeout=10).text == "done"
    agent.stop()


def _restarted_then_stopped(runtime: Runtime, i: int) -> None:
    model = ScriptedModel(["one", "two"])
    agent = runtime.start_agent(("gc", "transient", i), model=model, restart="transient")
    assert agent.run("hi", timeout=10).text == "one"
    first = agent.ref
    kill(first)
    wait_until(lambda: agent.alive and agent.ref != first, what="the agent was restarted")
    assert agent.run("hi", timeout=10).text == "two"
    agent.stop()


@pytest.mark.parametrize("life", [_stopped, _stopped_with_a_subagent, _restarted_then_stopped])
def test_an_agent_that_stopped_leaves_nothing_for_the_cyclic_collector(
    life: Callable[[Runtime, int], None],
    runtime: Runtime,
    garbage_after: Callable[[Callable[[], None]], Counter[str]],
) -> None:
    def lives() -> None:
        for i in range(1, ROUNDS + 1):
            life(runtime, i)
        wait_until(lambda: runtime.registry.count() == 0, what="every agent unregistered")

    life(runtime, 0)  # warm
    assert garbage_after(lives) == Counter()
