"""Faults a tool can cause: whatever it raises is its own error result, never a stop of the
runtime's event loop or of other agents; and a loop thread that dies anyway is restarted."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from agent_runtime import AgentStopped, RunFailed, Runtime
from agent_runtime.events import Error
from agent_runtime.messages import TextContent, ToolCall, ToolResult, ToolResultMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import Tool, ToolContext, execute_tool_call, tool

ESCAPING = [SystemExit, KeyboardInterrupt, GeneratorExit]


def text(result: ToolResult | ToolResultMessage) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


def contained(coro: Coroutine[Any, Any, ToolResult]) -> ToolResult:
    """Run `coro` as the root of a task on a fresh loop, as the agent loop runs each tool call;
    an exception escaping it fails the test (a KeyboardInterrupt escaping would otherwise stop
    the whole test session)."""

    async def as_a_task() -> ToolResult:
        return await asyncio.wait_for(asyncio.ensure_future(coro), 10)

    try:
        return asyncio.run(as_a_task())
    except BaseException as exc:
        pytest.fail(f"{type(exc).__name__} escaped execute_tool_call: {exc!r}")


def raising_tool(exc_type: type[BaseException], how: str) -> Tool:
    """A tool named `boom` raising `exc_type("bye")`: sync, `async def`, or `async def`
    awaiting a thread that raises it (the exception then comes back through a future)."""

    def raise_it() -> str:
        raise exc_type("bye")

    if how == "sync":

        def boom() -> str:
            """Raises."""
            return raise_it()

        return tool(boom)
    if how == "async":

        async def boom_async() -> str:
            """Raises."""
            return raise_it()

        return tool(name="boom")(boom_async)

    async def boom_in_thread() -> str:
        """Raises in a thread it awaits."""
        return await asyncio.to_thread(raise_it)

    return tool(name="boom")(boom_in_thread)


def call_boom(run_sync: Callable[[Callable[[], Any]], Any] | None = None, *, t: Tool) -> ToolResult:
    call = ToolCall(id="c1", name="boom")
    return contained(execute_tool_call(call, [t], ToolContext("c1", "boom"), run_sync=run_sync))


@pytest.mark.parametrize("how", ["sync", "async", "async_awaiting_a_thread"])
@pytest.mark.parametrize("exc_type", ESCAPING, ids=lambda e: e.__name__)
def test_system_exit_and_its_kin_become_error_results_naming_them(
    exc_type: type[BaseException], how: str
) -> None:
    result = call_boom(t=raising_tool(exc_type, how))
    assert result.is_error
    assert text(result) == f"Tool boom raised {exc_type.__name__}: bye"
    assert result.details is not None and result.details["exception"] == exc_type.__name__


@pytest.mark.parametrize("exc_type", ESCAPING, ids=lambda e: e.__name__)
def test_a_sync_tool_in_a_pool_raising_system_exit_and_its_kin_is_an_error_result(
    exc_type: type[BaseException],
) -> None:
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        result = call_boom(pool.submit, t=raising_tool(exc_type, "sync"))
    assert result.is_error and text(result) == f"Tool boom raised {exc_type.__name__}: bye"


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no message for you")


@pytest.mark.parametrize("is_async", [False, True])
def test_an_exception_whose_str_raises_is_an_error_result(is_async: bool) -> None:
    def boom() -> str:
        """Raises."""
        raise Unprintable()

    async def aboom() -> str:
        """Raises."""
        return boom()

    result = call_boom(t=tool(name="boom")(aboom if is_async else boom))
    assert result.is_error
    assert text(result).startswith("Tool boom raised Unprintable: ")
    assert "__str__ raised ValueError" in text(result)
    assert result.details is not None and result.details["exception"] == "Unprintable"


def run_with_a_raising_tool(runtime: Runtime, t: Tool) -> ToolResultMessage:
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[ToolCall(id="c1", name="boom", arguments={})]), "went on"]
    )
    agent = runtime.start_agent(("s", "faulty", 0), model=model, tools=[t])
    result = agent.run("go", timeout=10)
    assert result.text == "went on"
    (answer,) = [m for m in result.new_messages if isinstance(m, ToolResultMessage)]
    return answer


@pytest.mark.parametrize("how", ["sync", "async", "async_awaiting_a_thread"])
@pytest.mark.parametrize("exc_type", ESCAPING, ids=lambda e: e.__name__)
def test_a_tool_raising_system_exit_and_its_kin_leaves_the_runtime_working(
    runtime: Runtime, exc_type: type[BaseException], how: str
) -> None:
    loop = runtime.loop_tasks.loop
    answer = run_with_a_raising_tool(runtime, raising_tool(exc_type, how))
    assert answer.is_error and text(answer) == f"Tool boom raised {exc_type.__name__}: bye"
    other = runtime.start_agent(("s", "other", 0), model=ScriptedModel(["still here"]))
    assert other.run("hi", timeout=10).text == "still here"
    assert runtime.loop_tasks.loop is loop and loop.is_running()
    assert all(child.alive for child in runtime.supervisor.which_children())


def test_a_tool_exception_whose_str_raises_does_not_fail_the_run(runtime: Runtime) -> None:
    @tool
    def boom() -> str:
        """Raises."""
        raise Unprintable()

    answer = run_with_a_raising_tool(runtime, boom)
    assert answer.is_error and text(answer).startswith("Tool boom raised Unprintable: ")


def kill_the_loop(runtime: Runtime) -> None:
    """Make the runtime's loop thread die: a callback raising SystemExit out of the loop each
    time it resumes, until the thread gives up."""
    loop = runtime.loop_tasks.loop

    def bomb() -> None:
        loop.call_soon(bomb)
        raise SystemExit("bomb")

    loop.call_soon_threadsafe(bomb)


def test_a_loop_thread_that_dies_is_restarted_and_its_runs_end_with_error(
    runtime: Runtime,
) -> None:
    slow = ScriptedTurn(chunks=["never", " ends"], chunk_delay=60.0)
    agent = runtime.start_agent(("s", "busy", 0), model=ScriptedModel([slow, "back again"]))
    sub = agent.subscribe()
    old = runtime.loop_tasks
    run_id = agent.prompt("go")
    wait_until(lambda: agent.state().stream_message is not None, what="the answer streaming")

    kill_the_loop(runtime)

    ends = [e for e in sub.until_end(timeout=10, run_id=run_id) if isinstance(e, Error)]
    assert len(ends) == 1 and ends[0].reason.startswith("loop_crashed: ")
    assert "SystemExit: bomb" in ends[0].reason
    wait_until(lambda: runtime.loop_tasks is not old, what="a restarted loop")
    loop_tasks = next(c for c in runtime.supervisor.which_children() if c.id == "loop_tasks")
    assert loop_tasks.alive and loop_tasks.ref is runtime.loop_tasks.ref
    # The agent lived on that loop: it ended with it (a new one of the key may start).
    with pytest.raises(AgentStopped):
        agent.state()
    wait_until(lambda: runtime.registry.lookup(("s", "busy", 0)) is None)
    again = runtime.start_agent(("s", "busy", 0), model=ScriptedModel(["back again"]))
    assert again.run("again", timeout=10).text == "back again"
    other = runtime.start_agent(("s", "other", 0), model=ScriptedModel(["fine"]))
    assert other.run("hi", timeout=10).text == "fine"


def test_run_raises_run_failed_when_the_loop_thread_dies_under_it(runtime: Runtime) -> None:
    slow = ScriptedTurn(chunks=["never", " ends"], chunk_delay=60.0)
    agent = runtime.start_agent(("s", "busy", 0), model=ScriptedModel([slow]))
    failure: list[BaseException] = []

    def wait_for_the_run() -> None:
        try:
            agent.run("go", timeout=30)
        except BaseException as exc:
            failure.append(exc)

    waiter = concurrent.futures.ThreadPoolExecutor(1)
    done = waiter.submit(wait_for_the_run)
    wait_until(lambda: agent.state().stream_message is not None, what="the answer streaming")
    kill_the_loop(runtime)
    done.result(timeout=20)
    waiter.shutdown()
    assert len(failure) == 1 and isinstance(failure[0], RunFailed)
    assert failure[0].reason.startswith("loop_crashed: ")
