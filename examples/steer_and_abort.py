"""Steering a busy run, aborting one, and continuing after the abort.

    python examples/steer_and_abort.py

Both need a run in progress: `agent.stream(...)` returns only when its run is over, so a
`steer` or `abort` after it would land in the next run (or find none: `abort()` returns
False). Here the run is started with `prompt()`, which returns at once, and a subscription
shows where it is. The tools wait for a signal from this script, standing in for slow work,
so every step happens at the moment it is meant for, whatever the machine's load.

What it shows:
- a steering message is delivered at the next tool boundary: the batch's remaining tool
  calls are skipped, each still getting a result (an error result saying so);
- an abort ends the run with `Canceled`, and `agent.run(...)` raises `RunCanceled`; the tool
  call that was running gets its result first: every call gets exactly one;
- `continue_run()` goes on from the history as it was left.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from agent_runtime import (
    Canceled,
    RunCanceled,
    Runtime,
    ToolContext,
    ToolExecutionEnd,
    ToolExecutionStart,
    tool,
)
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.messages import ToolCall
from agent_runtime.testing import ScriptedModel, ScriptedTurn

released = threading.Event()


@tool
def search(query: str) -> str:
    """Search the notes (slow: it waits until the script releases it)."""
    released.wait(timeout=30)
    return f"3 notes on {query}"


@tool
async def crawl(ctx: ToolContext, site: str) -> str:
    """Crawl a site until told to stop (an abort sets the call's signal)."""
    await ctx.signal.wait_async(timeout=30)
    return f"crawled part of {site}" if ctx.aborted else f"crawled {site}"


def calls(*pairs: tuple[str, dict[str, str]]) -> ScriptedTurn:
    return ScriptedTurn(
        tool_calls=[ToolCall(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(pairs)]
    )


def main() -> None:
    model = ScriptedModel(
        [
            # run 1: two searches in one answer; the steer arrives during the first
            calls(("search", {"query": "pricing"}), ("search", {"query": "history"})),
            "Pricing only, as asked: 3 notes.",
            # run 2: a crawl, aborted
            calls(("crawl", {"site": "example.org"})),
            # run 3: continue_run() after the abort
            "Stopped early; the crawl got part of the site.",
        ]
    )
    with Runtime.start(config=RuntimeConfig(memory=MemoryConfig(store="memory"))) as runtime:
        agent = runtime.start_agent(("s1", "assistant", 0), model=model, tools=[search, crawl])
        events = agent.subscribe()

        print("-- steering")
        run_id = agent.prompt("Search for pricing and history")  # returns at once
        for event in events:
            if isinstance(event, ToolExecutionStart):  # the first search is running
                agent.steer("Only pricing, please")
                released.set()
                break
        for event in events.until_end(run_id=run_id):
            if isinstance(event, ToolExecutionEnd):
                print(f"{event.name}({event.tool_call_id}): error={event.is_error}")
        print("answer:", agent.state().messages[-1].text)

        print("-- abort")
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(agent.run, "Crawl example.org", 30)
            for event in events:
                if isinstance(event, ToolExecutionStart):
                    print("abort() ->", agent.abort())  # True: a run was in progress
                    break
            seen = []
            for event in events:
                seen.append(event.type)
                if isinstance(event, Canceled):
                    break
            print("events after the abort:", ", ".join(seen))
            try:
                pending.result()
            except RunCanceled as canceled:
                print("run() raised RunCanceled, reason:", canceled.reason)
        print("abort() when idle ->", agent.abort())  # False: nothing to abort

        print("-- continue")
        agent.continue_run()
        agent.wait_for_idle(timeout=30)
        print("answer:", agent.state().messages[-1].text)
        events.close()


if __name__ == "__main__":
    main()
