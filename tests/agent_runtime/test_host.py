"""Embedded in an asyncio host: lifecycle twins that never block the host's loop, shutdown
that ends every open stream with a terminal, and logging left to the application."""

from __future__ import annotations

import asyncio
import io
import threading
from typing import Any

import pytest
import structlog

from agent_runtime import Runtime
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.events import Canceled
from agent_runtime.memory import MemoryPolicy
from agent_runtime.runtime import _runtime
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import ToolContext, tool

CONFIG = RuntimeConfig(memory=MemoryConfig(store="memory"))


def test_astart_runs_the_start_off_the_host_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # The tree's start waits for a task of the host loop: a start that blocked the loop
    # would never see it run (and the test would fail on its deadline).
    host_ran = threading.Event()
    real_start_tree = _runtime.Runtime._start_tree

    def start_tree(self: Runtime) -> None:
        assert host_ran.wait(10), "the host loop did not run while the runtime started"
        real_start_tree(self)

    monkeypatch.setattr(_runtime.Runtime, "_start_tree", start_tree)

    async def main() -> None:
        async def host_task() -> None:
            host_ran.set()

        task = asyncio.create_task(host_task())
        runtime = await Runtime.astart(CONFIG)
        try:
            assert runtime.alive
            await task
        finally:
            await runtime.astop()
        assert not runtime.alive

    asyncio.run(main())


def test_async_with_astart_stops_the_runtime_on_exit() -> None:
    async def main() -> Runtime:
        async with Runtime.astart(CONFIG) as runtime:
            agent = runtime.start_agent(("s", "a", 0), model=ScriptedModel(["hello"]))
            assert (await agent.arun("hi", timeout=10)).text == "hello"
        return runtime

    runtime = asyncio.run(main())
    assert not runtime.alive


def test_astart_raises_the_start_errors_when_awaited() -> None:
    async def main() -> None:
        with pytest.raises(TypeError, match="config must be a RuntimeConfig"):
            await Runtime.astart(42)  # type: ignore[arg-type]

    asyncio.run(main())


def test_astop_awaited_on_the_runtime_s_own_loop_is_refused() -> None:
    seen: list[str] = []

    @tool
    async def stop_it(ctx: ToolContext) -> str:
        """Stop the runtime from inside."""
        try:
            await runtime.astop()
        except RuntimeError as exc:
            seen.append(str(exc))
        return "tried"

    runtime = Runtime.start(CONFIG)
    try:
        model = ScriptedModel(
            [ScriptedTurn(tool_calls=[{"id": "c1", "name": "stop_it", "arguments": {}}]), "done"]
        )
        agent = runtime.start_agent(("s", "a", 0), model=model, tools=[stop_it])
        assert agent.run("go", timeout=10).text == "done"
        assert runtime.alive
        assert len(seen) == 1 and "own event loop" in seen[0]
    finally:
        runtime.stop()


def test_stop_ends_every_open_stream_of_a_running_run_with_canceled() -> None:
    runtime = Runtime.start(CONFIG)
    model = ScriptedModel([ScriptedTurn(chunks=["a", "b"], chunk_delay=60.0)])
    agent = runtime.start_agent(("s", "a", 0), model=model, memory=MemoryPolicy.none())
    subs = [agent.subscribe() for _ in range(3)]
    agent.prompt("go")
    wait_until(lambda: agent.state().stream_message is not None)
    stopper = threading.Thread(target=runtime.stop)
    stopper.start()
    try:
        for sub in subs:
            terminals = [e for e in sub.until_end(timeout=10) if isinstance(e, Canceled)]
            assert [t.reason for t in terminals] == ["runtime_stopping"]
    finally:
        stopper.join(15)
    assert not stopper.is_alive() and not runtime.alive


def test_configure_logging_false_leaves_structlog_alone() -> None:
    structlog.reset_defaults()
    try:
        with Runtime.start(CONFIG, configure_logging=False):
            assert not structlog.is_configured()
    finally:
        structlog.reset_defaults()


def test_the_default_never_overrides_the_application_s_logging() -> None:
    structlog.reset_defaults()
    out = io.StringIO()
    ours: list[Any] = [structlog.processors.KeyValueRenderer()]
    structlog.configure(processors=ours, logger_factory=structlog.PrintLoggerFactory(out))
    try:
        with Runtime.start(CONFIG):
            assert structlog.get_config()["processors"] is ours
    finally:
        structlog.reset_defaults()
