"""Runtime: the root tree's children and order, restarts that lose nothing, clean stop."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime import Runtime
from agent_runtime.config import RuntimeConfig
from agent_runtime.testing import wait_until
from supervisors import kill


@pytest.fixture
def runtime() -> Iterator[Runtime]:
    rt = Runtime.start(RuntimeConfig())
    yield rt
    rt.stop()


def child_ref(runtime: Runtime, child_id: str):  # type: ignore[no-untyped-def]
    return next(c.ref for c in runtime.supervisor.which_children() if c.id == child_id)


def test_root_children_in_contract_order(runtime: Runtime) -> None:
    children = runtime.supervisor.which_children()
    assert [c.id for c in children] == [
        "abort_table",
        "registry",
        "subagents",
        "loop_tasks",
        "tool_tasks",
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


def test_abort_signals_survive_a_crash_of_the_table_owner(runtime: Runtime) -> None:
    signal = runtime.abort_table.new()
    old = child_ref(runtime, "abort_table")
    kill(old)
    wait_until(lambda: child_ref(runtime, "abort_table") not in (None, old))
    assert runtime.abort_table.get(signal.id) is signal
    runtime.abort_table.abort_all("x")
    assert signal.aborted


def test_registry_entries_survive_a_crash_of_its_owner(runtime: Runtime) -> None:
    runtime.registry.register(("s", "r", 0), "agent")
    old = child_ref(runtime, "registry")
    kill(old)
    wait_until(lambda: child_ref(runtime, "registry") not in (None, old))
    assert runtime.registry.lookup(("s", "r", 0)) == "agent"


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
