"""Every key of config/runtime.toml changes what the runtime does.

Each test changes one key of the shipped file (as an `AGENT_RUNTIME_<SECTION>__<KEY>` override)
and observes the behaviour that key governs; `COVERED` maps each key to its test, and
`test_every_key_of_the_shipped_file_is_changed_by_a_test` fails for a key without one. The
`[llm]` keys are the LLM layer's and are tested with it (tests/agent_runtime/llm/).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
import structlog
from structlog.testing import capture_logs

from agent_runtime import (
    AgentStopped,
    ConfigError,
    MemoryStoreError,
    RunFailed,
    Runtime,
    StreamOverflow,
    telemetry,
)
from agent_runtime.config import RuntimeConfig, load_config
from agent_runtime.events import (
    AgentEnd,
    Canceled,
    EventsDropped,
    ProviderRetry,
    ToolApprovalDecided,
    ToolExecutionEnd,
)
from agent_runtime.llm import (
    ChatRequest,
    ObservableModel,
    ProviderError,
    from_config,
    register_profile_kind,
)
from agent_runtime.loop import AgentContext, LoopConfig, stream
from agent_runtime.memory import CompactionSummary
from agent_runtime.messages import TextContent, ToolCall, ToolResultMessage, UserMessage
from agent_runtime.testing import MockProviderServer, ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import ToolContext, tool
from supervisors import MaxChildrenReached, kill

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "runtime.toml"
UNTESTED_HERE = {"llm", "server"}  # [server]: tests/agent_runtime/server/test_config_keys.py

F = TypeVar("F", bound=Callable[..., Any])
COVERED: dict[str, str] = {}


def covers(*keys: str) -> Callable[[F], F]:
    """Register the decorated test as the one that changes `keys`."""

    def mark(test: F) -> F:
        for key in keys:
            COVERED[key] = test.__name__
        return test

    return mark


def config_with(**changes: str) -> RuntimeConfig:
    """The shipped file with `section__key="value"` overridden (as the environment would)."""
    env = {f"AGENT_RUNTIME_{name.upper()}": value for name, value in changes.items()}
    return load_config(SHIPPED, env=env)


@contextmanager
def started(**changes: str) -> Iterator[Runtime]:
    with Runtime.start(config_with(**changes)) as runtime:
        yield runtime


def call(call_id: str, name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def tool_turn(*calls: ToolCall) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=list(calls))


def text_of(end: ToolExecutionEnd) -> str:
    return "".join(c.text for c in end.result.content if isinstance(c, TextContent))


def test_every_key_of_the_shipped_file_is_changed_by_a_test() -> None:
    keys = {
        f"{section}.{key}"
        for section, field in RuntimeConfig.model_fields.items()
        if section not in UNTESTED_HERE
        for key in field.annotation.model_fields  # type: ignore[union-attr]
    }
    assert keys - set(COVERED) == set()
    assert set(COVERED) - keys == set()  # no stale entry


# -- [supervision] -------------------------------------------------------------------------------


@covers("supervision.max_restarts")
def test_max_restarts_bounds_how_often_a_crashed_agent_comes_back() -> None:
    with started(supervision__max_restarts="0") as runtime:
        agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel([]), restart="transient")
        kill(agent.ref)
        with pytest.raises(AgentStopped):  # not restarted: 0 restarts allowed
            agent.state()


@pytest.mark.parametrize(("max_seconds", "comes_back"), [("0.000001", True), ("60", False)])
@covers("supervision.max_seconds")
def test_max_seconds_is_the_window_in_which_restarts_count(
    max_seconds: str, comes_back: bool
) -> None:
    with started(supervision__max_restarts="1", supervision__max_seconds=max_seconds) as runtime:
        agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel([]), restart="transient")
        first = agent.ref
        kill(first)
        wait_until(lambda: agent.alive and agent.ref is not first, what="the first restart")
        kill(agent.ref)  # the second crash: within the window it exceeds max_restarts=1
        if comes_back:
            assert agent.state().messages == []  # answered by the next incarnation
        else:
            with pytest.raises(AgentStopped):
                agent.state()


@pytest.mark.parametrize(("shutdown", "waited"), [("0.05", False), ("30", True)])
@covers("supervision.shutdown")
def test_shutdown_is_how_long_stop_waits_for_an_abandoned_tool(shutdown: str, waited: bool) -> None:
    gate, entered, finished = threading.Event(), threading.Event(), threading.Event()

    @tool
    def stubborn() -> str:
        """Ignores the abort."""
        entered.set()
        gate.wait(10)
        finished.set()
        return "done"

    runtime = Runtime.start(config_with(supervision__shutdown=shutdown, agent__abort_grace="0"))
    agent = runtime.start_agent(
        ("s", "main", 0), model=ScriptedModel([tool_turn(call("c", "stubborn"))]), tools=[stubborn]
    )
    agent.prompt("go")
    wait_until(entered.is_set)
    stopper = threading.Thread(target=runtime.stop, kwargs={"timeout": 60})
    stopper.start()
    if waited:
        stopper.join(0.2)
        assert stopper.is_alive()  # still waiting for the tool
        gate.set()
        stopper.join(10)
        assert finished.is_set()
    else:
        stopper.join(10)
        assert not stopper.is_alive() and not finished.is_set()  # gave up on the tool
        gate.set()


@covers("supervision.tool_workers")
def test_tool_workers_is_how_many_sync_tools_run_at_once() -> None:
    met = threading.Event()

    @tool(parallel_safe=True)
    def first() -> str:
        """Waits a little for `second`."""
        return "together" if met.wait(0.5) else "alone"

    @tool(parallel_safe=True)
    def second() -> str:
        """Signals `first`."""
        met.set()
        return "ok"

    with started(supervision__tool_workers="1") as runtime:
        model = ScriptedModel([tool_turn(call("a", "first"), call("b", "second")), "end"])
        agent = runtime.start_agent(("s", "main", 0), model=model, tools=[first, second])
        result = agent.run("go", timeout=10)
    outputs = [m.text for m in result.new_messages if isinstance(m, ToolResultMessage)]
    assert outputs == ["alone", "ok"]  # one thread: `second` only ran after `first`


@covers("supervision.max_agents")
def test_max_agents_caps_the_live_agents() -> None:
    with started(supervision__max_agents="1") as runtime:
        runtime.start_agent(("s", "a", 0), model=ScriptedModel([]))
        with pytest.raises(MaxChildrenReached):
            runtime.start_agent(("s", "b", 0), model=ScriptedModel([]))


# -- [event_stream] ------------------------------------------------------------------------------


def loop_stream(runtime: Runtime, chunks: int = 30) -> Any:
    turn = ScriptedTurn(chunks=[str(i) for i in range(chunks)])
    config = LoopConfig(model=ScriptedModel([turn]))
    return stream([UserMessage(content="go")], AgentContext(), config, runtime=runtime)


@covers("event_stream.max_queue")
def test_event_stream_max_queue_bounds_a_runs_stream() -> None:
    with started(event_stream__max_queue="3", event_stream__overflow="block") as runtime:
        out = loop_stream(runtime)
        wait_until(lambda: out.stats().queue_size == 3)
        assert out.stats().max_queue == 3 and not out.done  # the run waits for the reader
        assert isinstance(list(out)[-1], AgentEnd)


@pytest.mark.parametrize("overflow", ["error", "drop_oldest"])
@covers("event_stream.overflow")
def test_event_stream_overflow_is_the_policy_of_a_runs_stream(overflow: str) -> None:
    with started(event_stream__max_queue="2", event_stream__overflow=overflow) as runtime:
        out = loop_stream(runtime)
        if overflow == "error":
            with pytest.raises(RunFailed, match="stream_overflow"):
                out.result(timeout=5)
        else:
            wait_until(lambda: out.stats().dropped > 0)
            events = list(out)
            assert any(isinstance(e, EventsDropped) for e in events)
            assert isinstance(events[-1], AgentEnd)


def test_a_loop_config_bound_wins_over_the_event_stream_config() -> None:
    with started(event_stream__max_queue="2", event_stream__overflow="error") as runtime:
        config = LoopConfig(model=ScriptedModel(["x"]), stream_max_queue=500)
        out = stream([UserMessage(content="go")], AgentContext(), config, runtime=runtime)
        assert out.stats().max_queue == 500
        assert out.result(timeout=5)


# -- [subscription] ------------------------------------------------------------------------------


@covers("subscription.max_queue")
def test_subscription_max_queue_is_the_default_buffer_of_subscribe() -> None:
    with started(subscription__max_queue="3") as runtime:
        model = ScriptedModel([ScriptedTurn(chunks=list("abcdefgh"))])
        agent = runtime.start_agent(("s", "main", 0), model=model)
        sub = agent.subscribe()
        assert agent.subscribe(max_queue=1000).stream.max_queue == 1000  # given: it wins
        agent.prompt("go")
        wait_until(lambda: sub.stream.stats().queue_size == 3)
        assert sub.stream.stats().max_queue == 3 and agent.state().is_running  # held by `sub`
        assert isinstance(list(sub.until_end(timeout=5))[-1], AgentEnd)


@covers("subscription.overflow")
def test_subscription_overflow_is_the_default_policy_of_subscribe() -> None:
    with started(subscription__max_queue="2", subscription__overflow="drop_oldest") as runtime:
        model = ScriptedModel([ScriptedTurn(chunks=list("abcdefgh"))])
        agent = runtime.start_agent(("s", "main", 0), model=model)
        sub = agent.subscribe()
        agent.run("go", timeout=5)  # never waits for the reader that does not read
        events = list(sub.until_end(timeout=5))
        assert any(isinstance(e, EventsDropped) for e in events)
        assert isinstance(events[-1], AgentEnd)


@covers("subscription.block_timeout")
def test_subscription_block_timeout_is_how_long_a_run_waits_for_a_reader() -> None:
    with started(subscription__max_queue="1", subscription__block_timeout="0.05") as runtime:
        model = ScriptedModel([ScriptedTurn(chunks=list("abcdefgh"))])
        agent = runtime.start_agent(("s", "main", 0), model=model)
        sub = agent.subscribe()
        agent.run("go", timeout=10)  # well before the shipped 30 s
        with pytest.raises(StreamOverflow):
            list(sub.until_end(timeout=5))


def test_astream_takes_the_subscription_config_too() -> None:
    import asyncio

    with started(subscription__max_queue="2", subscription__overflow="drop_oldest") as runtime:
        model = ScriptedModel([ScriptedTurn(chunks=list("abcdefgh"), chunk_delay=0.001)])
        agent = runtime.start_agent(("s", "main", 0), model=model)

        async def read_late() -> list[Any]:
            events = []
            async for event in agent.astream("go"):
                if not events:
                    await asyncio.to_thread(agent.wait_for_idle, 5)  # fall behind on purpose
                events.append(event)
            return events

        events = asyncio.run(read_late())
    assert any(isinstance(e, EventsDropped) for e in events)
    assert isinstance(events[-1], AgentEnd)


# -- [agent] -------------------------------------------------------------------------------------


def pausing_tool() -> tuple[threading.Event, Any]:
    release = threading.Event()

    @tool
    def pause() -> str:
        """Waits for the test."""
        release.wait(5)
        return "ok"

    return release, pause


@covers("agent.steering_mode")
def test_steering_mode_all_delivers_every_queued_steer_at_once() -> None:
    release, pause = pausing_tool()
    with started(agent__steering_mode="all") as runtime:
        model = ScriptedModel([tool_turn(call("p", "pause")), "done"])
        agent = runtime.start_agent(("s", "main", 0), model=model, tools=[pause])
        agent.prompt("go")
        wait_until(lambda: agent.state().pending_tool_calls == ["p"])
        agent.steer("a")
        agent.steer("b")
        release.set()
        agent.wait_for_idle(timeout=5)
    texts = [m.text for m in model.requests[1].messages if isinstance(m, UserMessage)]
    assert texts[-2:] == ["a", "b"] and model.call_count == 2


@covers("agent.follow_up_mode")
def test_follow_up_mode_all_delivers_every_queued_follow_up_at_once() -> None:
    release, pause = pausing_tool()
    with started(agent__follow_up_mode="all") as runtime:
        model = ScriptedModel([tool_turn(call("p", "pause")), "first", "both"])
        agent = runtime.start_agent(("s", "main", 0), model=model, tools=[pause])
        agent.prompt("go")
        wait_until(lambda: agent.state().pending_tool_calls == ["p"])
        agent.follow_up("a")
        agent.follow_up("b")
        release.set()
        wait_until(lambda: model.call_count == 3)
        agent.wait_for_idle(timeout=5)
    texts = [m.text for m in model.requests[2].messages if isinstance(m, UserMessage)]
    assert texts[-2:] == ["a", "b"]


@covers("agent.max_tool_concurrency")
def test_max_tool_concurrency_is_how_many_parallel_calls_run_together() -> None:
    met = threading.Event()

    @tool(parallel_safe=True)
    def first() -> str:
        """Waits a little for `second`."""
        return "together" if met.wait(0.5) else "alone"

    @tool(parallel_safe=True)
    def second() -> str:
        """Signals `first`."""
        met.set()
        return "ok"

    with started(agent__max_tool_concurrency="1") as runtime:
        model = ScriptedModel([tool_turn(call("a", "first"), call("b", "second")), "end"])
        agent = runtime.start_agent(("s", "main", 0), model=model, tools=[first, second])
        result = agent.run("go", timeout=10)
    outputs = [m.text for m in result.new_messages if isinstance(m, ToolResultMessage)]
    assert outputs == ["alone", "ok"]


@covers("agent.max_tool_turns")
def test_max_tool_turns_ends_a_run_that_keeps_calling_tools() -> None:
    @tool
    def again() -> str:
        """Asks for more."""
        return "more"

    with started(agent__max_tool_turns="1") as runtime:
        model = ScriptedModel([tool_turn(call(f"c{i}", "again")) for i in range(5)])
        agent = runtime.start_agent(("s", "main", 0), model=model, tools=[again])
        result = agent.run("go", timeout=5)
    assert "max_tool_turns=1" in result.text
    assert model.call_count == 1


@covers("agent.tool_timeout")
def test_tool_timeout_bounds_a_tool_call() -> None:
    gate = threading.Event()

    @tool
    def slow() -> str:
        """Waits for the gate."""
        gate.wait(10)
        return "late"

    with started(agent__tool_timeout="0.05") as runtime:
        model = ScriptedModel([tool_turn(call("c", "slow")), "end"])
        agent = runtime.start_agent(("s", "main", 0), model=model, tools=[slow])
        sub = agent.subscribe()
        agent.run("go", timeout=10)
        gate.set()
        (end,) = [e for e in sub.until_end(timeout=5) if isinstance(e, ToolExecutionEnd)]
    assert end.is_error and "timed out" in text_of(end).lower()


@covers("agent.approval_timeout")
def test_approval_timeout_denies_a_call_nobody_decided_in_time() -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    def send_mail(to: str) -> str:
        """Sends a mail."""
        ran.append(to)
        return "sent"

    with started(agent__approval_timeout="0.05") as runtime:
        # An agent's own option wins over the config's default: this one waits.
        patient_model = ScriptedModel([tool_turn(call("p", "send_mail", to="alice")), "sent"])
        patient = runtime.start_agent(
            ("s", "main", 0), model=patient_model, tools=[send_mail], approval_timeout=60.0
        )
        patient.prompt("go")
        wait_until(lambda: [p.tool_call_id for p in runtime.pending_approvals()] == ["p"], 5)
        model = ScriptedModel([tool_turn(call("h", "send_mail", to="bob")), "end"])
        hasty = runtime.start_agent(("s", "main", 1), model=model, tools=[send_mail])
        sub = hasty.subscribe()
        assert hasty.run("go", timeout=10).text == "end"  # its call was denied, after ours
        decided = [e for e in sub.until_end(timeout=5) if isinstance(e, ToolApprovalDecided)]
        assert [p.tool_call_id for p in runtime.pending_approvals()] == ["p"]  # still waits
        patient.approve("p")
        patient.wait_for_idle(timeout=5)
    assert [(d.approved, d.reason) for d in decided] == [(False, "approval_timeout")]
    assert ran == ["alice"]


@pytest.mark.parametrize(("abort_grace", "finished"), [("0", False), ("30", True)])
@covers("agent.abort_grace")
def test_abort_grace_is_how_long_an_aborted_run_waits_for_its_tool(
    abort_grace: str, finished: bool
) -> None:
    gate, entered = threading.Event(), threading.Event()

    @tool
    def stubborn(ctx: ToolContext) -> str:
        """Ignores the abort until the gate opens."""
        entered.set()
        gate.wait(10)
        return "finished anyway"

    with started(agent__abort_grace=abort_grace) as runtime:
        model = ScriptedModel([tool_turn(call("c", "stubborn")), "end"])
        agent = runtime.start_agent(("s", "main", 0), model=model, tools=[stubborn])
        sub = agent.subscribe()
        agent.prompt("go")
        wait_until(entered.is_set)
        agent.abort()
        if finished:
            gate.set()  # within the grace: the run takes the tool's own result
        events = list(sub.until_end(timeout=5))
        gate.set()
    (end,) = [e for e in events if isinstance(e, ToolExecutionEnd)]
    assert isinstance(events[-1], Canceled)
    if finished:
        assert not end.is_error and text_of(end) == "finished anyway"
    else:
        assert end.result.details is not None and end.result.details["outcome"] == "unknown"


def test_the_removed_follow_up_poll_key_is_refused_naming_the_removal() -> None:
    with pytest.raises(ConfigError, match="follow_up_poll was removed"):
        load_config(env={"AGENT_RUNTIME_AGENT__FOLLOW_UP_POLL": "0.05"})


@covers("agent.thinking_level")
def test_thinking_level_reaches_the_model_request() -> None:
    with started(agent__thinking_level="high") as runtime:
        model = ScriptedModel(["x"])
        runtime.start_agent(("s", "main", 0), model=model).run("go", timeout=5)
    assert model.requests[0].reasoning == "high"


@covers("agent.restart")
def test_restart_transient_brings_a_crashed_agent_back() -> None:
    with started(agent__restart="transient") as runtime:
        agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["back"]))
        first = agent.ref
        kill(first)
        wait_until(lambda: agent.alive and agent.ref is not first)
        assert runtime.registry.lookup(("s", "main", 0)) is agent
        assert agent.run("go", timeout=5).text == "back"


# -- [retry] -------------------------------------------------------------------------------------


def failing_agent(runtime: Runtime, *errors: ProviderError) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel([*(ScriptedTurn(error=e) for e in errors), "recovered"])
    return runtime.start_agent(("s", "main", 0), model=model), model


def retries(agent: Any) -> list[ProviderRetry]:
    sub = agent.subscribe()
    try:
        agent.prompt("go")
        return [e for e in sub.until_end(timeout=10) if isinstance(e, ProviderRetry)]
    finally:
        sub.close()


@covers("retry.max_retries")
def test_max_retries_is_how_often_a_failed_call_is_tried_again() -> None:
    with started(retry__max_retries="1", retry__base_delay="0") as runtime:
        agent, model = failing_agent(runtime, ProviderError("down"), ProviderError("down"))
        with pytest.raises(RunFailed):
            agent.run("go", timeout=5)
    assert model.call_count == 2


@covers("retry.base_delay")
def test_base_delay_is_the_first_backoff() -> None:
    with started(retry__base_delay="0.01") as runtime:
        agent, _ = failing_agent(runtime, ProviderError("down"))
        (retry,) = retries(agent)
    assert 0.009 <= retry.delay <= 0.011  # 10 ms, +-10 % jitter (the shipped base is 2 s)


@covers("retry.max_delay")
def test_max_delay_caps_the_backoff() -> None:
    with started(retry__base_delay="100", retry__max_delay="0.01") as runtime:
        agent, _ = failing_agent(runtime, ProviderError("down"))
        (retry,) = retries(agent)
    assert retry.delay == pytest.approx(0.01)


@covers("retry.max_retry_after")
def test_max_retry_after_caps_a_providers_retry_after() -> None:
    with started(retry__base_delay="0", retry__max_retry_after="0.02") as runtime:
        agent, _ = failing_agent(runtime, ProviderError("busy", retry_after=100.0))
        (retry,) = retries(agent)
    assert retry.delay == pytest.approx(0.02)


# -- [thinking_budgets] --------------------------------------------------------------------------

LEVELS = ["minimal", "low", "medium", "high", "xhigh"]


@pytest.mark.parametrize("level", LEVELS)
@covers(*(f"thinking_budgets.{level}" for level in LEVELS))
def test_a_thinking_budget_reaches_the_provider_for_its_level(
    level: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    with MockProviderServer(["thought"]) as server:
        config = config_with(
            **{f"thinking_budgets__{level}": "4321"},
            llm__profiles__anthropic__base_url=server.base_url("anthropic"),
        )
        with Runtime.start(config) as runtime:
            model = from_config("anthropic", config=config)
            agent = runtime.start_agent(("s", "main", 0), model=model, thinking_level=level)
            agent.run("go", timeout=10)
    assert server.requests[0].json["thinking"] == {"type": "enabled", "budget_tokens": 4321}


# -- [memory] ------------------------------------------------------------------------------------

DEFAULT_DB = Path(".agent_runtime/memory.sqlite3")  # relative to each test's own directory


@pytest.mark.parametrize("store", ["sqlite", "memory"])
@covers("memory.store")
def test_memory_store_chooses_durable_sqlite_or_process_memory(store: str) -> None:
    with started(memory__store=store) as runtime:
        runtime.start_agent(("s", "main", 0), model=ScriptedModel(["kept"])).run("go", timeout=5)
        wait_until(lambda: len(runtime.memory.history("s").messages) == 2)
    assert DEFAULT_DB.exists() is (store == "sqlite")
    with started(memory__store=store) as runtime:  # a new runtime: only SQLite remembers
        assert len(runtime.memory.history("s").messages) == (2 if store == "sqlite" else 0)


@covers("memory.path")
def test_memory_path_is_where_the_session_history_is_stored(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere" / "sessions.sqlite3"
    with started(memory__path=str(path)) as runtime:
        runtime.start_agent(("s", "main", 0), model=ScriptedModel(["kept"])).run("go", timeout=5)
    assert path.exists() and not DEFAULT_DB.exists()
    with started(memory__path=str(path)) as runtime:
        assert len(runtime.memory.history("s").messages) == 2


@covers("memory.dsn")
def test_memory_dsn_is_the_server_a_postgres_store_opens() -> None:
    # Port 1 of 127.0.0.1 refuses at once: the error names this DSN, without its password.
    dsn = "postgresql://agent:s3cret@127.0.0.1:1/agents"
    named = r"'postgresql://agent@127\.0\.0\.1:1/agents'"
    with (
        pytest.raises(MemoryStoreError, match=named) as caught,
        started(memory__store="postgres", memory__dsn=dsn),
    ):
        pass
    assert "s3cret" not in str(caught.value)


def seeded(runtime: Runtime, *texts: str) -> None:
    writer = runtime.start_agent(("s", "writer", 0), model=ScriptedModel(list(texts)))
    for text in texts:
        writer.run(f"say {text}", timeout=5)
    wait_until(lambda: len(runtime.memory.history("s").messages) == 2 * len(texts))


@covers("memory.read")
def test_memory_read_false_starts_agents_without_the_session_history() -> None:
    with started(memory__read="false") as runtime:
        seeded(runtime, "one")
        reader = runtime.start_agent(("s", "reader", 0), model=ScriptedModel([]))
        assert reader.state().messages == []


@covers("memory.write")
def test_memory_write_false_keeps_runs_out_of_the_session() -> None:
    with started(memory__write="false") as runtime:
        agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["x"]))
        agent.run("go", timeout=5)
        assert runtime.memory_writer.flush(5, session="s")
        assert runtime.memory.history("s").messages == []
        assert len(agent.state().messages) == 2  # the agent's own history has the run


@covers("memory.last_n")
def test_memory_last_n_is_the_window_an_agent_starts_from() -> None:
    with started(memory__last_n="2") as runtime:
        seeded(runtime, "one", "two")
        reader = runtime.start_agent(("s", "reader", 0), model=ScriptedModel([]))
        texts = [m.text for m in reader.state().messages]  # type: ignore[union-attr]
    assert texts == ["say two", "two"]


@covers("memory.compact_above_bytes", "memory.compaction_profile")
def test_memory_compaction_summarises_a_session_past_the_size_with_the_profiles_model() -> None:
    summary = CompactionSummary(user_message="U: we talked", assistant_message="A: I answered")
    summarizer = ScriptedModel([summary.model_dump_json()] * 5)
    register_profile_kind("compaction-test", lambda name, profile, config: summarizer)
    changes = {"memory__compaction_profile": "summarizer", "memory__compact_above_bytes": "1500"}
    with started(llm__profiles__summarizer__provider="compaction-test", **changes) as runtime:
        agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["ok"] * 8))
        for i in range(8):
            agent.run(f"question {i}", timeout=10)
        auto = runtime.memory.auto_compaction
        assert auto is not None and auto.above_bytes == 1500
        wait_until(lambda: auto.compactions >= 1, timeout=10)
        assert runtime.memory_writer.flush(10) and auto.wait_idle(10)
        texts = [m.text for m in runtime.memory.history("s").messages]  # type: ignore[union-attr]
    assert texts[:2] == ["U: we talked", "A: I answered"]
    assert texts[-2:] == ["question 7", "ok"]


# -- [telemetry] ---------------------------------------------------------------------------------


@contextmanager
def logging_to(config: RuntimeConfig) -> Iterator[io.StringIO]:
    out = io.StringIO()
    try:
        assert telemetry.configure_logging(config.telemetry, stream=out, force=True)
        yield out
    finally:
        structlog.reset_defaults()


@pytest.mark.parametrize("configure", ["true", "false"])
@covers("telemetry.configure_logging")
def test_configure_logging_makes_runtime_start_configure_structlog(configure: str) -> None:
    structlog.reset_defaults()
    try:
        with started(telemetry__configure_logging=configure):
            assert structlog.is_configured() is (configure == "true")
    finally:
        structlog.reset_defaults()


@pytest.mark.parametrize("log_format", ["json", "console"])
@covers("telemetry.log_format")
def test_log_format_renders_json_lines_or_console_text(log_format: str) -> None:
    with logging_to(config_with(telemetry__log_format=log_format)) as out:
        structlog.get_logger("test").warning("thing.happened", size=3)
    line = out.getvalue().strip()
    if log_format == "json":
        assert json.loads(line)["event"] == "thing.happened"
    else:
        assert "thing.happened" in line and "warning" in line
        with pytest.raises(json.JSONDecodeError):
            json.loads(line)


@covers("telemetry.log_level")
def test_log_level_filters_lower_levels() -> None:
    with logging_to(config_with(telemetry__log_level="warning")) as out:
        log = structlog.get_logger("test")
        log.info("thing.routine")
        log.warning("thing.odd")
    assert [json.loads(line)["event"] for line in out.getvalue().splitlines()] == ["thing.odd"]


@pytest.mark.parametrize("log_content", ["true", "false"])
@covers("telemetry.log_content")
def test_log_content_decides_whether_prompts_and_answers_are_logged(
    log_content: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(telemetry, "_log_content", False)  # restored after the test
    model = ObservableModel(ScriptedModel(["the secret answer"]))
    with started(telemetry__log_content=log_content), capture_logs() as logs:
        request = ChatRequest(messages=[UserMessage(content="the secret prompt")])
        model.generate_sync(request, timeout=5)
    text = json.dumps(logs, default=str)
    assert ("the secret prompt" in text) is (log_content == "true")
    assert ("the secret answer" in text) is (log_content == "true")


def test_an_explicit_log_content_wins_over_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(telemetry, "_log_content", False)
    model = ObservableModel(ScriptedModel(["the secret answer"]), log_content=False)
    with started(telemetry__log_content="true"), capture_logs() as logs:
        model.generate_sync(ChatRequest(messages=[UserMessage(content="hi")]), timeout=5)
    assert "the secret answer" not in json.dumps(logs, default=str)


# In a subprocess: a process sets its OpenTelemetry providers once. The console exporter
# prints each span as JSON to stdout; the providers flush as the process exits.
_EXPORTING = """
import logging, structlog
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
from agent_runtime import Runtime
from agent_runtime.config import load_config
from agent_runtime.testing import ScriptedModel
with Runtime.start(load_config(sys.argv[1])) as runtime:
    runtime.start_agent(("s", "a", 0), model=ScriptedModel(["x"])).run("go", timeout=30)
"""


@pytest.mark.parametrize("exporter", ["console", "none"])
@covers("telemetry.exporter")
def test_exporter_console_prints_the_spans_and_none_installs_nothing(exporter: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_RUNTIME_")}
    done = subprocess.run(
        [sys.executable, "-c", "import sys\n" + _EXPORTING, str(SHIPPED)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "AGENT_RUNTIME_TELEMETRY__EXPORTER": exporter},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert ('"name": "invoke_agent a"' in done.stdout) is (exporter == "console")
    assert ('"name": "agent.runs"' in done.stdout) is (exporter == "console")  # a metric


@covers("telemetry.status_socket")
def test_status_socket_serves_the_runtimes_tree_while_it_runs(tmp_path: Path) -> None:
    from agent_runtime.runtime import fetch_status

    path = tmp_path / "status.sock"
    with started(telemetry__status_socket=str(path)) as runtime:
        runtime.start_agent(("s", "main", 0), model=ScriptedModel(["a"]))
        report = fetch_status(path)
        assert report.tree.runtime == runtime.name
        assert [tuple(a.key) for a in report.tree.agents] == [("s", "main", 0)]
    assert not path.exists()
