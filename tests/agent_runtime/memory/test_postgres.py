"""PostgresStore specifics, against a real server the test session starts (see conftest): several
processes on one session, errors that name the store and never the password, selection by
config, schema versions, lost connections, and reads of `changes` that skip the old history."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import traceback
from collections.abc import Iterator
from typing import Any

import pytest
from structlog.testing import capture_logs

from agent_runtime import Runtime
from agent_runtime.config import MemoryConfig, load_config
from agent_runtime.memory import (
    MemoryStoreError,
    PostgresStore,
    SessionMemory,
    SessionWriter,
)
from agent_runtime.memory._postgres_sql import CHANGES
from agent_runtime.testing import ScriptedModel, wait_until
from tests.agent_runtime.memory.conftest import batch, texts
from tests.agent_runtime.memory.postgres_server import Server

# Appends `count` batches of 3 to session "s" once it reads a line on stdin, each message
# tagged "<writer>:<n>/<i>", and prints "ACK <n>" after each append returned.
_WRITER = textwrap.dedent(
    """
    import logging, sys
    import structlog
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    from agent_runtime.memory import PostgresStore
    from agent_runtime.messages import UserMessage
    dsn, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with PostgresStore(dsn) as store:
        print("READY", flush=True)
        sys.stdin.readline()
        for n in range(count):
            batch = [UserMessage(content=f"{name}:{n}/{i}", timestamp=0.0) for i in range(3)]
            store.append("s", batch)
            print(f"ACK {n}", flush=True)
    """
)


def _secret_free(password: str, *texts: str) -> None:
    for text in texts:
        assert password not in text


def _rendered(exc: BaseException) -> str:
    """What a traceback of `exc` says about it and every exception chained to it (their types
    and messages: the source lines it would quote are the tests')."""
    lines: list[str] = []
    seen: traceback.TracebackException | None = traceback.TracebackException.from_exception(exc)
    while seen is not None:
        lines.extend(seen.format_exception_only())
        seen = seen.__cause__ or (None if seen.__suppress_context__ else seen.__context__)
    return "".join(lines)


@pytest.fixture
def pg(postgres_dsn: str) -> Iterator[PostgresStore]:
    with PostgresStore(postgres_dsn) as store:
        yield store


def test_two_processes_appending_to_one_session_keep_each_order_and_lose_nothing(
    postgres_dsn: str,
) -> None:
    count = 40
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, postgres_dsn, name, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    try:
        for proc in writers:  # both connected and set up: start them together
            assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        for proc in writers:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = [proc.communicate(timeout=60)[0] for proc in writers]
    finally:
        for proc in writers:
            proc.kill()
    assert [proc.returncode for proc in writers] == [0, 0]
    assert [out.split().count("ACK") for out in outputs] == [count, count]

    with PostgresStore(postgres_dsn) as store:
        history = store.load("s")
    stored = texts(history.messages)
    assert history.sequence == 2 * count
    assert len(stored) == 2 * count * 3
    batches = [stored[i : i + 3] for i in range(0, len(stored), 3)]
    for chunk in batches:  # every batch whole and contiguous
        writer, n = chunk[0].split("/")[0].split(":")
        assert chunk == [f"{writer}:{n}/{i}" for i in range(3)]
    for name in ("a", "b"):  # every writer's batches all there, in its order
        mine = [c[0].split("/")[0] for c in batches if c[0].startswith(f"{name}:")]
        assert mine == [f"{name}:{n}" for n in range(count)]
    assert history.bytes == sum(len(m.model_dump_json().encode()) for m in history.messages)


def test_two_stores_on_one_database_share_histories_and_sequences(postgres_dsn: str) -> None:
    with PostgresStore(postgres_dsn) as one, PostgresStore(postgres_dsn) as two:
        assert one.append("s", batch("a")) == 1
        assert two.append("s", batch("b")) == 2
        assert texts(one.load("s").messages) == texts(batch("a") + batch("b"))
        one.state_put("s", "k", "1")
        assert two.state_get("s", "k") == "1"
    with PostgresStore(postgres_dsn) as again:  # committed: outlives the stores
        assert again.load("s").sequence == 2


def test_a_wrong_password_is_refused_naming_the_store_never_a_password(
    postgres: Server,
) -> None:
    dsn = postgres.dsn(password="not-the-password-1234")
    with capture_logs() as logs, pytest.raises(MemoryStoreError) as caught:
        PostgresStore(dsn)
    message = str(caught.value)
    assert f"postgresql://postgres@127.0.0.1:{postgres.port}/postgres" in message
    assert "cannot be opened" in message and "password authentication failed" in message
    _secret_free("not-the-password-1234", message, _rendered(caught.value), repr(logs))
    _secret_free(postgres.password, message, _rendered(caught.value), repr(logs))


def test_an_unreachable_server_is_named_with_the_cause(postgres: Server) -> None:
    port = postgres.port + 1 if postgres.port < 65535 else postgres.port - 1
    dsn = f"postgresql://postgres:{postgres.password}@127.0.0.1:{port}/postgres"
    with pytest.raises(MemoryStoreError) as caught:
        PostgresStore(dsn, timeout=0)
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message and "cannot connect" in message
    assert caught.value.path == f"postgresql://postgres@127.0.0.1:{port}/postgres"
    _secret_free(postgres.password, message, _rendered(caught.value))


def test_a_missing_database_is_named(postgres: Server) -> None:
    with pytest.raises(MemoryStoreError, match='database "nowhere" does not exist') as caught:
        PostgresStore(postgres.dsn(dbname="nowhere"))
    assert "/nowhere" in str(caught.value)
    _secret_free(postgres.password, str(caught.value), _rendered(caught.value))


def test_a_dsn_that_does_not_parse_is_refused_without_its_password() -> None:
    with pytest.raises(MemoryStoreError, match="does not parse") as caught:
        PostgresStore("postgresql://agent:sec ret@db/agents")
    _secret_free("sec ret", str(caught.value), _rendered(caught.value))
    with pytest.raises(MemoryStoreError) as caught:
        PostgresStore("host=db password='it''s secret' user")
    _secret_free("secret", str(caught.value), _rendered(caught.value))


def test_a_lock_held_past_the_timeout_fails_the_append_naming_store_and_cause(
    postgres: Server, postgres_dsn: str
) -> None:
    import psycopg

    with PostgresStore(postgres_dsn, timeout=0.2) as store, SessionMemory(store) as memory:
        store.append("s", batch("a"))
        with psycopg.connect(postgres_dsn) as other:  # holds the session's row lock
            other.execute("SELECT 1 FROM agent_runtime_sessions WHERE session = 's' FOR UPDATE")
            writer = SessionWriter(memory)
            with capture_logs() as logs:
                future = writer.append("s", batch("b"))
                error = future.exception(timeout=10)
                writer.close()
            other.rollback()
        assert isinstance(error, MemoryStoreError)
        message = str(error)
        assert message.startswith(
            f"session memory 'postgresql://postgres@127.0.0.1:{postgres.port}/postgres?"
        )
        assert "appending to session 's' failed" in message
        assert "held a lock past the store's timeout" in message
        failed = [e for e in logs if e["event"] == "memory.append.failed"]
        assert failed and failed[0]["session"] == "s"
        rendered = repr(logs) + "".join(_rendered(e["exc_info"]) for e in failed)
        _secret_free(postgres.password, message, _rendered(error), rendered)
        assert store.load("s").sequence == 1  # nothing of the failed batch was stored
        store.append("s", batch("c"))  # the lock is gone: the store goes on
        assert texts(store.load("s").messages) == texts(batch("a") + batch("c"))


def test_a_read_on_a_connection_the_server_dropped_is_retried(
    pg: PostgresStore, postgres: Server
) -> None:
    import psycopg

    pg.append("s", batch("a"))
    with psycopg.connect(postgres.dsn(), autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'agent-runtime'"
        )
    assert texts(pg.load("s").messages) == texts(batch("a"))  # on a new connection
    pg.append("s", batch("b"))
    assert pg.load("s").sequence == 2


def test_tables_of_a_newer_schema_are_refused(pg: PostgresStore, postgres_dsn: str) -> None:
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO agent_runtime_schema (version) VALUES (99)")
    with pytest.raises(MemoryStoreError, match="schema version 99"):
        PostgresStore(postgres_dsn)


def test_a_session_with_a_nul_character_is_refused_by_name(pg: PostgresStore) -> None:
    with pytest.raises(ValueError, match="NUL"):
        pg.append("a\x00b", batch("a"))
    with pytest.raises(ValueError, match="NUL"):
        pg.state_put("s", "k\x00", "1")


def test_changes_reads_only_the_rows_appended_after_since(pg: PostgresStore) -> None:
    # The cost of `changes` must not grow with the history before `since`: the plan reads the
    # new rows through the index and no old row (none is read and then filtered out).
    for n in range(300):
        pg.append("s", batch(f"old{n}", 3))
    since = pg.load("s").sequence
    pg.append("s", batch("new", 2))

    def explain(conn: Any) -> dict[str, Any]:
        row = conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + CHANGES, {"session": "s", "since": since}
        ).fetchone()
        plan: dict[str, Any] = row[0][0]["Plan"]
        return plan

    plan = pg._run("explain", explain)
    nodes, shown = list(_nodes(plan)), json.dumps(plan)
    by_seq = [n for n in nodes if n.get("Index Name") == "agent_runtime_messages_by_seq"]
    assert by_seq and all(n["Actual Rows"] == 2 for n in by_seq), shown
    assert not any(n["Node Type"] == "Seq Scan" for n in nodes), shown
    for removed in ("Rows Removed by Filter", "Rows Removed by Index Recheck"):
        assert all(n.get(removed, 0) == 0 for n in nodes), shown
    assert texts(pg.changes("s", since).messages) == ["new/0", "new/1"]


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def test_the_postgres_store_is_chosen_by_config(postgres_dsn: str) -> None:
    env = {"AGENT_RUNTIME_MEMORY__STORE": "postgres", "AGENT_RUNTIME_MEMORY__DSN": postgres_dsn}
    config = load_config(None, env=env)
    assert "pw-" not in repr(config) and "pw-" not in config.model_dump_json()
    with Runtime.start(config) as runtime:
        assert isinstance(runtime.memory.store, PostgresStore)
        agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["kept"]))
        agent.run("go", timeout=10)
        wait_until(lambda: len(runtime.memory.history("s").messages) == 2, timeout=10)
    with Runtime.start(config) as runtime:  # another runtime (or process) sees it
        assert len(runtime.memory.history("s").messages) == 2


def test_a_postgres_store_without_a_dsn_is_a_config_error() -> None:
    from agent_runtime import ConfigError

    with pytest.raises(ConfigError, match=r"memory\.dsn.*postgres"):
        load_config(None, env={"AGENT_RUNTIME_MEMORY__STORE": "postgres"})
    with pytest.raises(ConfigError, match=r"memory\.dsn.*not be empty"):
        load_config(None, env={"AGENT_RUNTIME_MEMORY__DSN": " "})
    with pytest.raises(ValueError, match=r"needs memory\.dsn"):
        SessionMemory.from_config(MemoryConfig(store="postgres"))


def test_without_psycopg_the_store_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'agent-runtime\[postgres\]'"):
        PostgresStore("postgresql://agent@db/agents")
