"""loop.stream: runs on the runtime's event loop into a bounded EventStream."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agent_runtime import RunCanceled, RunFailed, Runtime
from agent_runtime.abort import AbortSignal
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.event_stream import EventStream
from agent_runtime.events import AgentEnd, Canceled, MessageUpdate, ToolExecutionEnd
from agent_runtime.loop import AgentContext, LoopConfig, stream, stream_continue
from agent_runtime.messages import AssistantMessage, ToolResultMessage, UserMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import Tool, ToolContext, tool
from supervisors import SupervisedActor, kill
from tests.agent_runtime.loop.helpers import call, calls_turn


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    # Module-scoped, so it starts before the per-test chdir: its durable session memory
    # needs a directory of its own, or it lands in the directory pytest was started from.
    memory = tmp_path_factory.mktemp("stream-runtime") / "memory.sqlite3"
    with Runtime.start(RuntimeConfig(memory=MemoryConfig(path=str(memory)))) as rt:
        yield rt


class _Owner(SupervisedActor):
    pass


def test_the_shared_runtime_keeps_its_session_memory_out_of_the_working_tree(
    runtime: Runtime, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = runtime.memory.store.path  # type: ignore[attr-defined]
    assert isinstance(path, Path) and path.is_absolute()
    assert tmp_path_factory.getbasetemp() in path.parents


def waits_for_abort() -> tuple[Tool, threading.Event, list[str]]:
    """A tool that runs until its run is aborted (up to 30 s), and what it saw."""
    started = threading.Event()
    seen: list[str] = []

    @tool
    def hang(ctx: ToolContext) -> str:
        """Hang."""
        started.set()
        if ctx.signal.wait(30):
            seen.append(str(ctx.signal.reason))
        return "stopped"

    return hang, started, seen


def test_canceling_the_stream_aborts_a_run_inside_a_tool_at_once(runtime: Runtime) -> None:
    hang, started, seen = waits_for_abort()
    model = ScriptedModel([calls_turn(call("h", "hang")), "never"])
    out = stream(
        [UserMessage(content="go")], AgentContext(tools=[hang]), LoopConfig(model), runtime=runtime
    )
    wait_until(started.is_set, timeout=5)
    out.cancel("reader_gone")
    wait_until(lambda: seen, timeout=5)
    assert seen == ["stream_closed"]
    with pytest.raises(RunCanceled, match="reader_gone"):
        out.result(timeout=5)
    assert model.call_count == 1  # the aborted run asked the model nothing more


@pytest.mark.timing
def test_the_stream_lifetime_timeout_aborts_a_run_inside_a_tool(runtime: Runtime) -> None:
    hang, _, seen = waits_for_abort()
    out = stream(
        [UserMessage(content="go")],
        AgentContext(tools=[hang]),
        LoopConfig(ScriptedModel([calls_turn(call("h", "hang")), "never"])),
        runtime=runtime,
        event_stream=EventStream(timeout=0.2),
    )
    wait_until(lambda: seen, timeout=5)
    with pytest.raises(RunCanceled, match="timeout"):
        out.result(timeout=5)


def test_the_stream_owner_exiting_aborts_a_run_inside_a_tool(runtime: Runtime) -> None:
    hang, started, seen = waits_for_abort()
    owner = _Owner.start()
    out = stream(
        [UserMessage(content="go")],
        AgentContext(tools=[hang]),
        LoopConfig(ScriptedModel([calls_turn(call("h", "hang")), "never"])),
        runtime=runtime,
        owner=owner,
    )
    wait_until(started.is_set, timeout=5)
    kill(owner)
    wait_until(lambda: seen, timeout=5)
    with pytest.raises(RunCanceled, match="owner_down"):
        out.result(timeout=5)


def test_canceling_the_stream_aborts_a_hung_provider_call(runtime: Runtime) -> None:
    signal = AbortSignal()
    model = ScriptedModel([ScriptedTurn(text="late", delay=30.0)])
    out = stream(
        [UserMessage(content="go")], AgentContext(), LoopConfig(model), signal, runtime=runtime
    )
    wait_until(lambda: model.call_count == 1, timeout=5)
    out.cancel()
    wait_until(lambda: signal.aborted, timeout=5)
    assert signal.reason == "stream_closed"


def test_a_run_that_ends_itself_leaves_its_signal_alone(runtime: Runtime) -> None:
    signal = AbortSignal()
    out = stream(
        [UserMessage(content="go")],
        AgentContext(),
        LoopConfig(ScriptedModel(["ok"])),
        signal,
        runtime=runtime,
    )
    out.result(timeout=5)
    out.cancel("late")
    assert not signal.aborted


def test_each_stream_gets_a_fresh_run_id_shared_by_its_events(runtime: Runtime) -> None:
    def run_ids() -> tuple[str, set[str]]:
        out = stream(
            [UserMessage(content="go")],
            AgentContext(),
            LoopConfig(ScriptedModel(["ok"])),
            runtime=runtime,
        )
        return out.run_id, {e.run_id for e in out}

    first, first_events = run_ids()
    second, second_events = run_ids()
    assert first and second and first != second
    assert first_events == {first} and second_events == {second}


def test_a_given_run_id_is_kept_by_the_stream_and_its_events(runtime: Runtime) -> None:
    out = stream(
        [UserMessage(content="go")],
        AgentContext(),
        LoopConfig(ScriptedModel(["ok"]), run_id="mine"),
        runtime=runtime,
    )
    assert out.run_id == "mine" and {e.run_id for e in out} == {"mine"}
    into = EventStream(run_id="theirs")
    stream(
        [UserMessage(content="go")],
        AgentContext(),
        LoopConfig(ScriptedModel(["ok"])),
        runtime=runtime,
        event_stream=into,
    )
    assert {e.run_id for e in into} == {"theirs"}


def test_run_happens_on_the_loop_thread_and_sync_tools_in_the_tool_pool(runtime: Runtime) -> None:
    threads: dict[str, str] = {}

    @tool
    def where() -> str:
        """Where am I."""
        threads["tool"] = threading.current_thread().name
        return "here"

    model = ScriptedModel([calls_turn(call("w", "where")), "done"])
    out = stream(
        [UserMessage(content="go")],
        AgentContext(tools=[where]),
        LoopConfig(model=model),
        runtime=runtime,
    )
    messages = out.result(timeout=5)
    assert [type(m).__name__ for m in messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "AssistantMessage",
    ]
    assert threads["tool"].startswith(f"{runtime.name}.tool_tasks")


def test_the_stream_yields_events_then_the_terminal(runtime: Runtime) -> None:
    out = stream(
        [UserMessage(content="go")],
        AgentContext(),
        LoopConfig(model=ScriptedModel([ScriptedTurn(chunks=["a", "b"])])),
        runtime=runtime,
    )
    events = list(out)
    assert isinstance(events[-1], AgentEnd)
    assert sum(isinstance(e, MessageUpdate) for e in events) == 2


def test_a_crash_in_the_loop_ends_the_stream_with_loop_crashed(runtime: Runtime) -> None:
    def broken_getter() -> list[object]:
        raise RuntimeError("getter bug")

    out = stream(
        [UserMessage(content="go")],
        AgentContext(),
        LoopConfig(model=ScriptedModel(["x"]), get_steering_messages=broken_getter),  # type: ignore[arg-type]
        runtime=runtime,
    )
    with pytest.raises(RunFailed) as info:
        out.result(timeout=5)
    assert info.value.reason.startswith("loop_crashed: RuntimeError: getter bug")


def test_abort_through_the_signal_cancels_the_stream(runtime: Runtime) -> None:
    signal = runtime.abort_table.new()
    model = ScriptedModel([ScriptedTurn(chunks=["a", "b"], chunk_delay=30.0)])
    out = stream(
        [UserMessage(content="go")],
        AgentContext(),
        LoopConfig(model=model),
        signal,
        runtime=runtime,
    )
    wait_until(lambda: model.call_count == 1)
    signal.abort("user_abort")
    with pytest.raises(RunCanceled) as info:
        out.result(timeout=2)
    assert info.value.reason == "user_abort"


def test_a_stream_canceled_by_its_reader_aborts_the_run(runtime: Runtime) -> None:
    signal = AbortSignal()
    release = threading.Event()

    @tool
    def slow() -> str:
        """Slow."""
        release.wait(5)
        return "x"

    out = stream(
        [UserMessage(content="go")],
        AgentContext(tools=[slow]),
        LoopConfig(model=ScriptedModel([calls_turn(call("s", "slow")), "never"])),
        signal,
        runtime=runtime,
    )
    out.cancel("reader_gone")
    release.set()
    wait_until(lambda: signal.aborted, timeout=5)
    assert signal.reason == "stream_closed"
    assert isinstance(list(out)[-1], Canceled)


def test_stream_continue_resumes_after_tool_results(runtime: Runtime) -> None:
    history = [
        UserMessage(content="q"),
        AssistantMessage(content=[call("c", "t")], stop_reason="tool_use"),
        ToolResultMessage(tool_call_id="c", tool_name="t"),
    ]
    out = stream_continue(
        AgentContext(messages=history),
        LoopConfig(model=ScriptedModel(["resumed"])),
        runtime=runtime,
    )
    assert [m.text for m in out.result(timeout=5)] == ["resumed"]  # type: ignore[union-attr]


def test_backpressure_a_block_stream_holds_the_run_until_read(runtime: Runtime) -> None:
    chunks = [str(i) for i in range(50)]
    out = stream(
        [UserMessage(content="go")],
        AgentContext(),
        LoopConfig(
            model=ScriptedModel([ScriptedTurn(chunks=chunks)]),
            stream_max_queue=4,
            stream_overflow="block",
        ),
        runtime=runtime,
    )
    wait_until(lambda: out.stats().queue_size == 4)
    assert not out.done
    events = list(out)
    assert isinstance(events[-1], AgentEnd)
    assert out.stats().dropped == 0
    assert not any(isinstance(e, ToolExecutionEnd) for e in events)


def test_an_abort_ends_a_run_held_by_a_block_stream_nobody_reads(runtime: Runtime) -> None:
    signal = runtime.abort_table.new()
    out = stream(
        [UserMessage(content="go")],
        AgentContext(),
        LoopConfig(
            model=ScriptedModel([ScriptedTurn(chunks=[str(i) for i in range(50)])]),
            stream_max_queue=2,
            stream_overflow="block",
        ),
        signal,
        runtime=runtime,
    )
    wait_until(lambda: out.stats().queue_size == 2)  # the run waits for a reader
    signal.abort("user_abort")
    with pytest.raises(RunCanceled) as info:
        out.result(timeout=5)  # before: the run waited for the reader, however long
    assert info.value.reason == "user_abort"
    assert out.stats().dropped >= 1  # the event it waited with, counted


def test_stream_continue_refuses_an_empty_or_assistant_ending_context(runtime: Runtime) -> None:
    config = LoopConfig(model=ScriptedModel([]))
    with pytest.raises(ValueError) as empty:
        stream_continue(AgentContext(), config, runtime=runtime)
    assert str(empty.value) == "Cannot continue: no messages in context"
    ended = AgentContext(messages=[UserMessage(content="q"), AssistantMessage(content=[])])
    with pytest.raises(ValueError) as assistant:
        stream_continue(ended, config, runtime=runtime)
    assert str(assistant.value) == "Cannot continue from message role: assistant"


def test_an_overflowing_error_stream_aborts_the_run_and_ends_with_error(runtime: Runtime) -> None:
    signal = AbortSignal()
    chunks = [str(i) for i in range(20)]
    config = LoopConfig(
        model=ScriptedModel([ScriptedTurn(chunks=chunks)]),
        stream_max_queue=3,
        stream_overflow="error",
    )
    out = stream([UserMessage(content="go")], AgentContext(), config, signal, runtime=runtime)
    with pytest.raises(RunFailed) as info:
        out.result(timeout=5)
    assert info.value.reason.startswith("stream_overflow: ")
    assert signal.aborted and signal.reason == "stream_overflow"


def test_a_run_task_canceled_before_it_starts_still_ends_the_stream(runtime: Runtime) -> None:
    class NeverRuns:
        def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
            coro.close()
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            future.cancel()
            return future

    fake = SimpleNamespace(  # a LoopHost whose event loop never runs a task
        submit=NeverRuns().submit, run_sync=runtime.run_sync, new_signal=runtime.new_signal
    )
    out = stream(
        [UserMessage(content="go")],
        AgentContext(),
        LoopConfig(model=ScriptedModel(["x"])),
        runtime=fake,  # type: ignore[arg-type]
    )
    with pytest.raises(RunCanceled) as info:
        out.result(timeout=1)
    assert info.value.reason == "task_cancelled"


def test_stream_overflow_policy_is_checked_when_the_config_is_built() -> None:
    with pytest.raises(ValueError, match="stream_overflow"):
        LoopConfig(model=ScriptedModel([]), stream_overflow="drop-old")  # type: ignore[arg-type]
