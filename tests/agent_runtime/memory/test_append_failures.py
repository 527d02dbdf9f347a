"""A failed session-memory append is never silent: the run's result and its `AgentEnd` carry
`memory_error`, the metric `agent_runtime.memory.append_failures` counts it, and a locked
database holds up no other agent."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime import Runtime
from agent_runtime.events import AgentEnd
from agent_runtime.memory import MemoryPolicy, SqliteStore
from agent_runtime.testing import ScriptedModel, wait_until

PATH = Path(".agent_runtime/memory.sqlite3")  # the default, relative to the test's own cwd


@pytest.fixture
def locked() -> Iterator[sqlite3.Connection]:
    """Another process's connection holding the write lock of the runtime's memory file."""
    holder = sqlite3.connect(PATH, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    yield holder
    holder.close()


def store_of(runtime: Runtime) -> SqliteStore:
    store = runtime.memory.store
    assert isinstance(store, SqliteStore)
    return store


def test_a_failed_append_is_reported_by_the_result_and_the_end_event(
    runtime: Runtime, locked: sqlite3.Connection
) -> None:
    store_of(runtime).timeout = 0.05  # give up on the lock at once
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["hello", "again"]))
    with agent.subscribe() as sub:
        result = agent.run("hi", timeout=30)
        ends = [e for e in sub.until_end(run_id=result.run_id) if isinstance(e, AgentEnd)]
    assert result.text == "hello"  # the run's result stands
    assert result.memory_error is not None
    assert "locked" in result.memory_error and str(PATH) in result.memory_error
    assert [end.memory_error for end in ends] == [result.memory_error]
    assert [m.role for m in agent.state().messages] == ["user", "assistant"]
    assert runtime.memory.history("s").messages == []  # nothing was stored
    locked.close()  # the database is free again: the next run is committed
    assert agent.run("more", timeout=30).memory_error is None
    assert [m.text for m in runtime.memory.history("s").messages] == ["more", "again"]


def test_a_run_whose_turns_were_committed_has_no_memory_error(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["hello"]))
    assert agent.run("hi", timeout=30).memory_error is None
    assert runtime.memory.history("s").sequence == 1


def test_a_locked_database_holds_up_no_other_agent(
    runtime: Runtime, locked: sqlite3.Connection
) -> None:
    store = store_of(runtime)
    store.timeout = 600  # the writer's append waits for the lock for as long as the test runs
    assert store._conn is not None
    waiting = threading.Event()
    store._conn.set_trace_callback(lambda sql: waiting.set() if "IMMEDIATE" in sql else None)
    writer = runtime.start_agent(("a", "main", 0), model=ScriptedModel(["stored later"]))
    writer.prompt("hi")
    wait_until(waiting.is_set, timeout=30)  # its turn's append waits for the lock
    other = runtime.start_agent(  # reads the history of its session meanwhile
        ("b", "main", 0), model=ScriptedModel(["fine"]), memory=MemoryPolicy.read_only()
    )
    assert other.run("hello", timeout=30).text == "fine"
    assert writer.state().is_running  # still waiting for its commit
    locked.close()
    writer.wait_for_idle(timeout=60)
    wait_until(lambda: runtime.memory.history("a").sequence == 1, timeout=30)


# Counts failed appends with an OpenTelemetry SDK of its own (the global meter provider can be
# set once per process), then prints the counter's points as "<error.type> <value>".
_COUNT_FAILURES = textwrap.dedent(
    """
    import logging, sys
    import structlog
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    import sqlite3
    from agent_runtime.memory import MemoryStoreError, SessionMemory, SqliteStore
    from agent_runtime.messages import UserMessage
    memory = SessionMemory(SqliteStore(sys.argv[1], timeout=0))
    memory.append("s", [UserMessage(content="kept")])
    holder = sqlite3.connect(sys.argv[1], isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    for _ in range(2):
        try:
            memory.append("s", [UserMessage(content="lost")])
        except MemoryStoreError:
            pass
    for resource in reader.get_metrics_data().resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "agent_runtime.memory.append_failures":
                    for point in metric.data.data_points:
                        print(point.attributes["error.type"], point.value)
    """
)


def test_failed_appends_are_counted_by_the_append_failures_metric(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _COUNT_FAILURES, str(tmp_path / "memory.sqlite3")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.split() == ["MemoryStoreError", "2"], done.stdout + done.stderr
