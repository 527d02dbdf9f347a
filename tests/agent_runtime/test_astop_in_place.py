"""`Agent.astop` (and a tool's `ctx.aspawn`) on the runtime's own loop: no thread, no hop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable, Coroutine
from typing import Any

from agent_runtime import Agent, Runtime
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.events import Canceled, Event
from agent_runtime.messages import ToolCall
from agent_runtime.testing import ScriptedModel, ScriptedTurn
from agent_runtime.tools import ToolContext, tool

MEMORY = RuntimeConfig(memory=MemoryConfig(store="memory"))


class NoThreads(concurrent.futures.ThreadPoolExecutor):
    """A loop's default executor that fails whatever is handed to it (`asyncio.to_thread`)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{fn!r} was sent to a worker thread")


async def eventually(condition: Callable[[], object], what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


def on_runtimes_loop(body: Callable[[Runtime], Coroutine[Any, Any, Any]]) -> Any:
    """`body(runtime)` on a loop that refuses worker threads, shared with the runtime."""

    async def main() -> Any:
        async with Runtime.astart(MEMORY) as rt:
            loop = asyncio.get_running_loop()
            loop.set_default_executor(NoThreads(max_workers=1))
            try:
                return await body(rt)
            finally:
                loop.set_default_executor(concurrent.futures.ThreadPoolExecutor())

    return asyncio.run(main())


def test_astop_on_the_runtimes_loop_stops_the_agent_before_it_returns() -> None:
    async def body(rt: Runtime) -> None:
        agents = [await rt.astart_agent(("s", "a", i), model=ScriptedModel()) for i in range(50)]
        for agent in agents:
            await agent.astop()
            assert not agent.alive  # stopped in place, not soon
        assert rt.subagents.count() == 0
        again = await rt.astart_agent(("s", "a", 0), model=ScriptedModel(["back"]))
        assert (await again.arun("hi", timeout=10)).text == "back"  # its key is free again

    on_runtimes_loop(body)


def test_astop_in_place_aborts_the_run_and_its_readers_get_the_end() -> None:
    async def body(rt: Runtime) -> list[Event]:
        hung = ScriptedModel([ScriptedTurn(chunks=["a", "b"], chunk_delay=60.0)])
        agent = await rt.astart_agent(("s", "a", 0), model=hung)
        sub = agent.subscribe()
        agent.prompt("go")
        await eventually(lambda: agent.state().is_running, "the run")
        await agent.astop()
        ends = [e async for e in sub.auntil_end(timeout=5)]
        await agent.astop()  # idempotent
        return ends

    ends = on_runtimes_loop(body)
    assert isinstance(ends[-1], Canceled)
    assert ends[-1].reason == "agent_stopped"


def test_astop_in_place_stops_the_subagents_the_agent_spawned() -> None:
    spawned: list[Agent] = []

    @tool
    async def make(ctx: ToolContext) -> str:
        """Spawns two helpers."""
        for _ in range(2):
            spawned.append(await ctx.aspawn("helper", model=ScriptedModel([])))
        return "ok"

    async def body(rt: Runtime) -> None:
        model = ScriptedModel([ScriptedTurn(tool_calls=[ToolCall(id="c", name="make")]), "done"])
        parent = await rt.astart_agent(("s", "main", 0), model=model, tools=[make])
        await parent.arun("go", timeout=10)  # aspawn in place too: no worker thread
        assert [a.key for a in spawned] == [("s", "helper", 0), ("s", "helper", 1)]
        assert [a.alive for a in spawned] == [True, True]
        await parent.astop()
        assert [a.alive for a in spawned] == [False, False]
        assert rt.registry.count_by_session("s") == 0

    on_runtimes_loop(body)


def test_astop_in_place_stops_a_transient_agent_for_good() -> None:
    async def body(rt: Runtime) -> None:
        agent = await rt.astart_agent(("s", "t", 0), model=ScriptedModel(), restart="transient")
        await agent.astop()
        assert not agent.alive
        # A restart is made by the agent's supervisor on this loop within a few of its
        # steps: a whole run of another agent takes many more.
        other = await rt.astart_agent(("s", "other", 0), model=ScriptedModel(["ok"]))
        assert (await other.arun("go", timeout=10)).text == "ok"
        assert not agent.alive and rt.registry.lookup(("s", "t", 0)) is None

    on_runtimes_loop(body)


def test_astop_from_another_loop_still_stops_the_agent() -> None:
    with Runtime.start(MEMORY) as rt:  # the runtime's loop runs on a thread of its own
        agent = rt.start_agent(("s", "o", 0), model=ScriptedModel())

        async def main() -> bool:
            await agent.astop()
            return agent.alive

        assert asyncio.run(main()) is False
        assert rt.registry.lookup(("s", "o", 0)) is None


def test_a_tools_aspawn_on_the_runtimes_own_loop_thread_adds_no_thread() -> None:
    spawned: list[Agent] = []

    @tool
    async def make(ctx: ToolContext) -> str:
        """Spawns a helper and asks it."""
        helper = await ctx.aspawn("helper", model=ScriptedModel(["helped"]))
        spawned.append(helper)
        return (await helper.arun("help", timeout=10)).text

    with Runtime.start(MEMORY) as rt:  # the runtime's loop runs on a thread of its own
        rt.loop_tasks.loop.set_default_executor(NoThreads(max_workers=1))
        model = ScriptedModel([ScriptedTurn(tool_calls=[ToolCall(id="c", name="make")]), "done"])
        parent = rt.start_agent(("s", "main", 0), model=model, tools=[make])
        assert parent.run("go", timeout=10).text == "done"
        result = [m for m in parent.state().messages if m.role == "tool_result"]
        assert [m.text for m in result] == ["helped"]  # type: ignore[attr-defined]
        assert spawned[0].key == ("s", "helper", 0) and spawned[0].alive
        parent.stop()
        assert not spawned[0].alive  # stopped with its parent
