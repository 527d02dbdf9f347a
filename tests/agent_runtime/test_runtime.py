"""Runtime: the root tree's children and order, restarts that lose nothing, clean stop."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from agent_runtime import Runtime
from agent_runtime.config import RuntimeConfig
from agent_runtime.messages import ToolCall
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import tool
from supervisors import kill


def child_ref(runtime: Runtime, child_id: str):  # type: ignore[no-untyped-def]
    return next(c.ref for c in runtime.supervisor.which_children() if c.id == child_id)


def test_root_children_in_contract_order(runtime: Runtime) -> None:
    children = runtime.supervisor.which_children()
    assert [c.id for c in children] == [
        "abort_table",
        "registry",
        "loop_tasks",
        "tool_tasks",
        "subagents",
    ]
    assert all(c.alive for c in children)
    assert next(c for c in children if c.id == "subagents").type == "supervisor"


def test_loop_tasks_runs_coroutines_and_tool_tasks_runs_functions(runtime: Runtime) -> None:
    async def double(x: int) -> int:
        await asyncio.sleep(0)
        return 2 * x

    assert runtime.loop_tasks.submit(double(21)).result(timeout=5) == 42
    assert runtime.tool_tasks.submit(lambda: threading.current_thread().name).result(timeout=5)
    assert runtime.tool_tasks.max_workers == RuntimeConfig().supervision.tool_workers


def test_a_restarted_table_owner_holds_the_runtimes_own_table(runtime: Runtime) -> None:
    # What makes a restart of an owner lossless: every incarnation is handed the table the
    # Runtime made, never a fresh one (the tables themselves belong to the Runtime).
    for child_id, table in (("abort_table", runtime.abort_table), ("registry", runtime.registry)):
        old = child_ref(runtime, child_id)
        kill(old)
        wait_until(lambda: child_ref(runtime, child_id) not in (None, old))  # noqa: B023
        new = child_ref(runtime, child_id)
        assert new.proxy().table.get(timeout=5) is table


def test_a_crash_of_a_table_owner_leaves_a_running_agent_alone(runtime: Runtime) -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    def hold() -> str:
        """Hold until released."""
        started.set()
        release.wait(10)
        return "released"

    model = ScriptedModel([ScriptedTurn(tool_calls=[ToolCall(id="h", name="hold")]), "done"])
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[hold])
    agent.prompt("go")
    assert started.wait(5)
    for child_id in ("abort_table", "registry"):
        old = child_ref(runtime, child_id)
        kill(old)
        wait_until(lambda: child_ref(runtime, child_id) not in (None, old))  # noqa: B023
    assert runtime.registry.lookup(("s", "main", 0)) is agent
    assert agent.state().is_running
    release.set()
    agent.wait_for_idle(timeout=5)
    assert agent.state().messages[-1].text == "done"  # type: ignore[union-attr]
    assert agent.alive


def test_a_crashed_event_loop_is_replaced_by_a_working_one(runtime: Runtime) -> None:
    old_loop = runtime.loop_tasks
    kill(old_loop.ref)
    wait_until(lambda: runtime.loop_tasks is not old_loop and runtime.loop_tasks.alive)

    async def answer() -> str:
        return "ok"

    assert runtime.loop_tasks.submit(answer()).result(timeout=5) == "ok"


def test_stop_aborts_signals_and_leaves_no_thread_behind() -> None:
    before = set(threading.enumerate())
    rt = Runtime.start(RuntimeConfig())
    signal = rt.abort_table.new()
    rt.tool_tasks.submit(lambda: None).result(timeout=5)

    async def noop() -> None:
        return None

    rt.loop_tasks.submit(noop()).result(timeout=5)
    assert len(set(threading.enumerate()) - before) >= 5
    rt.stop(timeout=10)
    assert signal.aborted and signal.reason == "runtime_stopping"
    assert not rt.alive
    wait_until(lambda: not (set(threading.enumerate()) - before), timeout=5)
    rt.stop()  # idempotent


def test_stop_cancels_a_pending_coroutine() -> None:
    rt = Runtime.start(RuntimeConfig())
    started = threading.Event()

    async def forever() -> None:
        started.set()
        await asyncio.sleep(3600)

    future = rt.loop_tasks.submit(forever())
    assert started.wait(5)
    rt.stop(timeout=10)
    assert future.cancelled()


def test_several_runtimes_are_independent() -> None:
    with Runtime.start(RuntimeConfig()) as first, Runtime.start(RuntimeConfig()) as second:
        assert first.name != second.name
        first.registry.register(("s", "r", 0), "only-in-first")
        assert second.registry.lookup(("s", "r", 0)) is None
        first.stop()
        assert second.alive
        assert second.tool_tasks.submit(lambda: 7).result(timeout=5) == 7


def test_context_manager_stops_the_runtime() -> None:
    with Runtime.start(RuntimeConfig()) as rt:
        assert rt.alive
    assert not rt.alive


def test_start_reads_a_config_path(tmp_path: Path) -> None:
    path = tmp_path / "rt.toml"
    path.write_text("[supervision]\ntool_workers = 3\n")
    with Runtime.start(path) as rt:
        assert rt.config.supervision.tool_workers == 3
        assert rt.tool_tasks.max_workers == 3


def test_start_rejects_a_config_of_the_wrong_type() -> None:
    with pytest.raises(TypeError, match="RuntimeConfig"):
        Runtime.start(config=42)  # type: ignore[arg-type]


@pytest.mark.timing
def test_stop_keeps_its_timeout_when_a_sync_tool_ignores_the_abort() -> None:
    from agent_runtime.messages import ToolCall
    from agent_runtime.testing import ScriptedModel, ScriptedTurn
    from agent_runtime.tools import tool

    release = threading.Event()

    @tool
    def stubborn() -> str:
        """Ignores every abort."""
        release.wait(30)
        return "late"

    rt = Runtime.start(RuntimeConfig())
    try:
        model = ScriptedModel([ScriptedTurn(tool_calls=[ToolCall(id="c", name="stubborn")])])
        agent = rt.start_agent(("s", "main", 0), model=model, tools=[stubborn])
        agent.prompt("go")
        wait_until(lambda: agent.state().pending_tool_calls == ["c"])
        started = time.monotonic()
        rt.stop(timeout=2.0)  # would raise TimeoutError if the pool waited its 5 s shutdown
        assert time.monotonic() - started < 2.0 + 0.5
        assert not rt.alive
    finally:
        release.set()
