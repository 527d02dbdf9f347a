"""Embedded in an asyncio host: lifecycle twins that never block the host's loop, shutdown
that ends every open stream with a terminal, and logging left to the application."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import io
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import structlog

from agent_runtime import AgentBusy, AgentStopped, Runtime
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.event_stream import Subscription
from agent_runtime.events import AgentEnd, Canceled, Event, MessageUpdate, is_terminal
from agent_runtime.memory import MemoryPolicy
from agent_runtime.runtime import _runtime
from agent_runtime.testing import FunctionModel, ScriptedModel, ScriptedTurn, wait_until
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
            agent = await runtime.astart_agent(("s", "a", 0), model=ScriptedModel(["hello"]))
            assert (await agent.arun("hi", timeout=10)).text == "hello"
        return runtime

    runtime = asyncio.run(main())
    assert not runtime.alive


def test_astart_raises_the_start_errors_when_awaited() -> None:
    async def main() -> None:
        with pytest.raises(TypeError, match="config must be a RuntimeConfig"):
            await Runtime.astart(42)  # type: ignore[arg-type]

    asyncio.run(main())


@pytest.mark.parametrize("share_loop", [True, False])
def test_astart_runs_the_runtime_s_loop_work_on_the_host_loop_unless_told_not_to(
    share_loop: bool,
) -> None:
    seen: list[tuple[asyncio.AbstractEventLoop, int]] = []

    @tool
    async def where(ctx: ToolContext) -> str:
        """Say where async tools (and every run's loop) run."""
        seen.append((asyncio.get_running_loop(), threading.get_ident()))
        return "here"

    async def main() -> tuple[asyncio.AbstractEventLoop, int]:
        async with Runtime.astart(CONFIG, share_loop=share_loop) as runtime:
            model = ScriptedModel(
                [ScriptedTurn(tool_calls=[{"id": "c1", "name": "where", "arguments": {}}]), "ok"]
            )
            agent = await runtime.astart_agent(("s", "a", 0), model=model, tools=[where])
            assert (await agent.arun("go", timeout=10)).text == "ok"
        return asyncio.get_running_loop(), threading.get_ident()

    host = asyncio.run(main())
    assert len(seen) == 1
    assert (seen[0] == host) is share_loop


def test_blocking_calls_on_a_shared_host_loop_raise_naming_the_async_twin() -> None:
    async def main() -> None:
        async with Runtime.astart(CONFIG) as runtime:
            agent = await runtime.astart_agent(("s", "a", 0), model=ScriptedModel(["hi"]))
            # Waiting here would wait for work only this very thread can do.
            with pytest.raises(RuntimeError, match="astop"):
                runtime.stop()
            with pytest.raises(RuntimeError, match="arun"):
                agent.run("go")
            assert runtime.alive
            assert (await agent.arun("go", timeout=10)).text == "hi"

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


def test_a_host_loop_closed_under_a_shared_runtime_ends_the_run_in_flight() -> None:
    # The application ends its loop without stopping the runtime first: the run on it ends
    # (its agent stopped with the loop), it does not hang on a loop that will never run.
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> Runtime:
        return await Runtime.astart(CONFIG)

    runtime = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    try:
        model = ScriptedModel([ScriptedTurn(text="ok", delay=30)])
        first = runtime.start_agent(("closed", "a", 0), model=model, memory=MemoryPolicy.none())
        second = runtime.start_agent(
            ("closed", "a", 1), model=ScriptedModel(["ok"]), memory=MemoryPolicy.none()
        )
        first.prompt("go")
        wait_until(lambda: model.call_count == 1, what="the run at its model")
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
        with contextlib.suppress(AgentStopped):  # the loop's end may have stopped it already
            second.prompt("go")  # a new run finds the loop closed
        with contextlib.suppress(AgentStopped):  # (not TimeoutError: it ended with the loop)
            first.wait_for_idle(timeout=5)
    finally:
        runtime.stop()


def test_tokens_of_a_host_loop_s_last_step_reach_the_subscriber_before_the_run_s_end() -> None:
    # The application's loop stops in the step that streamed two tokens (gathered for the
    # subscription, to be handed over when the step is over, which never comes) and is
    # closed; the runtime is then stopped from another thread: the tokens come first.
    loop = asyncio.new_event_loop()

    async def stream(_request: object) -> AsyncIterator[str]:
        yield "a"
        yield "b"
        asyncio.get_running_loop().stop()  # the loop's last step
        await asyncio.sleep(3600)
        yield "never"

    async def start() -> tuple[Runtime, Subscription]:
        runtime = await Runtime.astart(CONFIG)
        agent = await runtime.astart_agent(
            ("closed", "a", 0), model=FunctionModel(stream), memory=MemoryPolicy.none()
        )
        sub = agent.subscribe()
        agent.prompt("go")
        return runtime, sub

    runtime, sub = loop.run_until_complete(start())
    try:
        loop.run_forever()  # until the model stops it
        with contextlib.suppress(RuntimeError):  # (the run's task, never finished)
            loop.close()
    finally:
        stopper = threading.Thread(target=runtime.stop)
        stopper.start()
        stopper.join(15)
    events = list(sub.until_end(timeout=5))
    assert [e.delta.delta for e in events if isinstance(e, MessageUpdate)] == ["a", "b"]
    assert is_terminal(events[-1])
    updates = [i for i, e in enumerate(events) if isinstance(e, MessageUpdate)]
    assert max(updates) < len(events) - 1


def test_configure_logging_false_leaves_structlog_alone() -> None:
    structlog.reset_defaults()
    try:
        with Runtime.start(CONFIG, configure_logging=False):
            assert not structlog.is_configured()
    finally:
        structlog.reset_defaults()


class _SetUp:
    """An object of the application's set-up, alive before the runtime starts."""


def test_freeze_gc_freezes_what_is_alive_once_the_runtime_started_and_only_then() -> None:
    gc.unfreeze()
    before = _SetUp()
    try:
        with Runtime.start(CONFIG):
            assert gc.get_freeze_count() == 0  # off by default: the process's GC is its own
        with Runtime.start(CONFIG, freeze_gc=True) as runtime:
            assert gc.get_freeze_count() > 0
            # the set-up and the runtime's tree are frozen: no collection walks them again
            tree = runtime._subagents  # made as the tree starts
            assert not any(o is before or o is tree for o in gc.get_objects())
            agent = runtime.start_agent(("f", "a", 0), model=ScriptedModel(["hi"]))
            assert agent.run("go", timeout=10).text == "hi"
            assert any(o is agent for o in gc.get_objects())  # made after: collected as ever

        async def main() -> int:
            async with Runtime.astart(CONFIG, freeze_gc=True):
                return gc.get_freeze_count()

        gc.unfreeze()
        assert asyncio.run(main()) > 0
    finally:
        gc.unfreeze()


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


# -- astream, async subscriptions ---------------------------------------------------------------


@pytest.fixture
def runtime(make_runtime: Callable[..., Runtime]) -> Runtime:
    return make_runtime(CONFIG)


def chunks(n: int, delay: float = 0.0) -> ScriptedModel:
    return ScriptedModel([ScriptedTurn(chunks=["x"] * n, chunk_delay=delay)])


def test_astream_starts_the_run_when_called_and_raises_busy_there(runtime: Runtime) -> None:
    model = ScriptedModel([ScriptedTurn(chunks=["a", "b"], chunk_delay=60.0)])
    agent = runtime.start_agent(("s", "a", 0), model=model, memory=MemoryPolicy.none())

    async def main() -> None:
        events = agent.astream("first")  # started here, before anything is awaited
        assert agent.state().is_running
        with pytest.raises(AgentBusy):
            agent.astream("second")
        await events.aclose()
        agent.abort()
        await agent.await_idle(10)

    asyncio.run(main())


def test_astream_yields_the_run_to_its_end(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "a", 0), model=chunks(5), memory=MemoryPolicy.none())

    async def main() -> list[Event]:
        return [event async for event in agent.astream("go")]

    events = asyncio.run(main())
    assert isinstance(events[-1], AgentEnd)
    assert sum(isinstance(e, MessageUpdate) for e in events) == 5


def test_a_stream_broken_out_of_and_dropped_never_holds_the_run(runtime: Runtime) -> None:
    # 3,000 updates overflow the stream's 1,000-event buffer: a reader still subscribed
    # would hold the run for its 30 s block_timeout; dropped, it is unsubscribed at once.
    agent = runtime.start_agent(("s", "a", 0), model=chunks(3000), memory=MemoryPolicy.none())

    async def main() -> None:
        async for _ in agent.astream("go"):
            break
        await agent.await_idle(10)

    asyncio.run(main())
    assert agent.state().error is None


@pytest.mark.parametrize("abort_on_close", [False, True])
def test_closing_a_stream_aborts_its_run_only_when_asked(
    runtime: Runtime, abort_on_close: bool
) -> None:
    agent = runtime.start_agent(("s", "a", 0), model=chunks(50, 0.01), memory=MemoryPolicy.none())
    watcher = agent.subscribe()

    async def main() -> None:
        events = agent.astream("go", abort_on_close=abort_on_close)
        await anext(events)
        await events.aclose()
        await agent.await_idle(10)

    asyncio.run(main())
    terminal = [e for e in watcher.until_end(timeout=10) if is_terminal(e)]
    if abort_on_close:
        assert isinstance(terminal[0], Canceled) and terminal[0].reason == "stream_closed"
    else:
        assert isinstance(terminal[0], AgentEnd)


def test_async_reading_of_a_backlog_lets_the_host_loop_run_between_batches(
    runtime: Runtime,
) -> None:
    agent = runtime.start_agent(("s", "a", 0), model=chunks(2000), memory=MemoryPolicy.none())
    sub = agent.subscribe(max_queue=5000)
    agent.run("go", timeout=30)  # the whole run is buffered now

    async def main() -> tuple[int, int]:
        ticks = 0
        stop = False

        async def ticker() -> None:
            nonlocal ticks
            while not stop:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        read = 0
        async for _ in sub.auntil_end(timeout=10):
            read += 1
        stop = True
        await task
        return read, ticks

    read, ticks = asyncio.run(main())
    assert read > 2000
    assert ticks >= read // 256  # one turn of the host loop per batch at least


def test_auntil_end_times_out_like_until_end(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "a", 0), model=ScriptedModel(), memory=MemoryPolicy.none())
    sub = agent.subscribe()

    async def main() -> None:
        with pytest.raises(TimeoutError):
            async for _ in sub.auntil_end(timeout=0.05):
                pass

    asyncio.run(main())


@pytest.mark.timing
def test_auntil_end_s_timeout_bounds_the_whole_read(runtime: Runtime) -> None:
    # Events keep coming, each well within the timeout: the read still ends at its deadline
    # (the timeout is for the whole read, not for each event), after the events before it.
    async def trickle(_request: Any) -> AsyncIterator[str]:
        for _ in range(400):
            yield "w "
            await asyncio.sleep(0.01)

    model = FunctionModel(trickle, record_requests=False)
    agent = runtime.start_agent(("s", "a", 0), model=model, memory=MemoryPolicy.none())
    sub = agent.subscribe(max_queue=1000)

    async def main() -> tuple[int, float]:
        agent.prompt("go")
        read = 0
        started = asyncio.get_running_loop().time()
        with pytest.raises(TimeoutError):
            async for _ in sub.auntil_end(timeout=0.3):
                read += 1
        return read, asyncio.get_running_loop().time() - started

    read, elapsed = asyncio.run(main())
    agent.abort()
    assert read > 3
    assert 0.25 <= elapsed < 2.0


def test_a_reader_of_auntil_end_cancelled_while_waiting_is_cancelled(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "a", 0), model=ScriptedModel(), memory=MemoryPolicy.none())
    sub = agent.subscribe()

    async def main() -> None:
        async def read() -> None:
            async for _ in sub.auntil_end(timeout=60):
                pass

        task = asyncio.ensure_future(read())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)

    asyncio.run(main())


def test_areset_and_astop_never_block_the_loop(runtime: Runtime) -> None:
    model = ScriptedModel([ScriptedTurn(chunks=["a", "b"], chunk_delay=60.0), "after"])
    agent = runtime.start_agent(("s", "a", 0), model=model, memory=MemoryPolicy.none())

    async def main() -> None:
        events = agent.astream("go")
        await anext(events)
        await agent.areset()  # aborts the run and waits for its end without blocking
        assert agent.state().messages == [] and not agent.state().is_running
        assert (await agent.arun("again", timeout=10)).text == "after"
        await agent.astop()
        assert not agent.alive

    asyncio.run(main())
