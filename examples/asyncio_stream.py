"""Agents inside an asyncio application: what a streaming HTTP handler does, without a server.

    python examples/asyncio_stream.py

- `async with Runtime.astart(...)` starts the runtime without holding the loop; by default
  (`share_loop=True`) the runtime's event-loop work (runs, LLM I/O, `async def` tools) runs
  as tasks on this very loop, so the events are made where they are read;
- `agent.astream(prompt, abort_on_close=True)` starts the run at the call, so a busy agent
  raises `AgentBusy` before anything is sent (a handler answers 409), and a reader that goes
  away (here: a `break`) aborts its run;
- nothing here blocks the loop: a ticker task keeps ticking while the runs stream.
For a real server see examples/starlette_sse.py (Starlette under uvicorn).
"""

from __future__ import annotations

import asyncio

from agent_runtime import Agent, AgentBusy, MessageUpdate, Runtime, ToolContext, tool
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.messages import ToolCall
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until

tool_loops: list[asyncio.AbstractEventLoop] = []


@tool
async def lookup(ctx: ToolContext, topic: str) -> str:
    """Look a topic up (an async tool: it runs on the runtime's loop, here the application's)."""
    tool_loops.append(asyncio.get_running_loop())
    await asyncio.sleep(0.01)
    return f"notes on {topic}"


async def handle(agent: Agent, prompt: str, *, leave_after: int | None = None) -> str:
    """A streaming handler: the response as text, as an SSE body would carry it."""
    try:
        events = agent.astream(prompt, abort_on_close=True)
    except AgentBusy:
        return "409 busy"
    words = 0
    async for event in events:
        if isinstance(event, MessageUpdate) and event.delta.kind == "text":
            words += 1
            if leave_after is not None and words == leave_after:
                break  # the client went away: the run is aborted (reason "stream_closed")
    return f"200, {words} streamed deltas"


async def ticker(ticks: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        ticks[0] += 1
        await asyncio.sleep(0.01)


async def main() -> None:
    words = [f"w{i} " for i in range(20)]
    model = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[ToolCall(id="c1", name="lookup", arguments={"topic": "x"})]),
            ScriptedTurn(chunks=words, chunk_delay=0.01),
            ScriptedTurn(chunks=words, chunk_delay=0.05),  # the reader leaves early
        ]
    )
    ticks, stop = [0], asyncio.Event()
    tick_task = asyncio.create_task(ticker(ticks, stop))
    config = RuntimeConfig(memory=MemoryConfig(store="memory"))
    async with Runtime.astart(config=config) as runtime:  # share_loop=True
        agent = await runtime.astart_agent(("s1", "assistant", 0), model=model, tools=[lookup])
        first = asyncio.create_task(handle(agent, "Tell me about x"))
        await asyncio.sleep(0)  # let the first request start its run
        print("second request while busy:", await handle(agent, "me too"))
        print("first request:", await first)
        print("the async tool ran on this loop:", tool_loops == [asyncio.get_running_loop()])

        print("a client that leaves:", await handle(agent, "Once more", leave_after=3))
        await agent.await_idle(timeout=30)  # its run was aborted; the agent is free again

        def one_canceled() -> bool:
            return runtime.stats().runs["canceled"] == 1

        await asyncio.to_thread(wait_until, one_canceled, 10.0)  # stats lag a few ms at most
        print("runs by outcome:", runtime.stats().runs)
    stop.set()
    await tick_task
    print("the loop kept ticking:", ticks[0] > 10)


if __name__ == "__main__":
    asyncio.run(main())
