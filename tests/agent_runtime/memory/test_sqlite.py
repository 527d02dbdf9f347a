"""SqliteStore specifics: durability across a killed process, WAL and sync settings, JSON rows,
files shared by several stores, paths, and schema versions."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_runtime import Runtime
from agent_runtime.config import RuntimeConfig
from agent_runtime.memory import ConcurrentModification, MemoryStoreError, SqliteStore
from agent_runtime.messages import MessageAdapter
from agent_runtime.testing import wait_until
from tests.agent_runtime.memory.conftest import batch, texts

# Appends batches of 3 to session "s" and prints "ACK <n>" once append(n) has returned; with
# a second argument it kills itself with SIGKILL right after that many appends returned.
_WRITER = textwrap.dedent(
    """
    import logging, os, signal, sys
    import structlog
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    from agent_runtime.memory import SqliteStore
    from agent_runtime.messages import UserMessage
    store = SqliteStore(sys.argv[1])
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else None
    n = 0
    while True:
        store.append("s", [UserMessage(content=f"{n}/{i}", timestamp=0.0) for i in range(3)])
        if limit is not None and n + 1 == limit:
            os.kill(os.getpid(), signal.SIGKILL)
        print(f"ACK {n}", flush=True)
        n += 1
    """
)


def _writer(path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), *args],
        stdout=subprocess.PIPE,
        text=True,
    )


def _assert_whole_batches(path: Path, at_least: int) -> int:
    """The file holds batches 0..k-1, each whole and in order, with k >= at_least; return k."""
    with SqliteStore(path) as store:
        history = store.load("s")
    stored = texts(history.messages)
    assert len(stored) % 3 == 0, "a batch was stored in part"
    count = len(stored) // 3
    assert stored == [f"{n}/{i}" for n in range(count) for i in range(3)]
    assert history.sequence == count
    assert count >= at_least
    return count


pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")


def test_every_append_that_returned_survives_a_sigkill_right_after_it(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    proc = _writer(path, "25")
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert Path(f"{path}-wal").exists(), "the commits were still in the WAL when it died"
    assert _assert_whole_batches(path, at_least=25) == 25


def test_a_sigkill_during_appends_keeps_every_acknowledged_batch_whole(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    proc = _writer(path)
    assert proc.stdout is not None
    acked = -1
    for line in proc.stdout:
        acked = int(line.split()[1])
        if acked >= 30:
            break
    proc.kill()  # SIGKILL, very likely in the middle of the next append
    rest, _ = proc.communicate(timeout=30)
    acked = max([acked, *(int(line.split()[1]) for line in rest.splitlines())])
    assert proc.returncode == -signal.SIGKILL
    _assert_whole_batches(path, at_least=acked + 1)


def test_history_persists_across_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    with SqliteStore(path) as store:
        store.append("s", batch("a"))
        store.replace("s", batch("b", 1), 1)
        store.append("gone", batch("g"))
        store.delete("gone")
    with SqliteStore(str(path)) as store:
        assert store.load("s").messages == batch("b", 1)
        assert store.load("s").sequence == 2
        assert store.sessions() == ["s"]
        assert store.load("gone").sequence == 2


def test_the_file_is_in_wal_mode_with_full_sync_and_a_timeout(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    with SqliteStore(path, timeout=2.5) as store:
        conn = store._conn
        assert conn is not None
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert store.timeout == 2.5  # waited for by the store itself, not by SQLite
    with SqliteStore(path, synchronous="NORMAL") as store:
        assert store._conn is not None
        assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 1


def test_messages_are_stored_as_their_json(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    with SqliteStore(path) as store:
        store.append("s", batch("a", 2))
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT position, seq, json FROM messages WHERE session = 's' ORDER BY position"
        ).fetchall()
    assert [(p, s) for p, s, _ in rows] == [(0, 1), (1, 1)]
    assert [MessageAdapter.validate_json(j) for _, _, j in rows] == batch("a", 2)


def test_two_stores_on_one_file_share_histories_and_sequences(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    with SqliteStore(path) as one, SqliteStore(path) as two:
        assert one.append("s", batch("a")) == 1
        assert two.append("s", batch("b")) == 2
        history = one.load("s")
        assert texts(history.messages) == texts(batch("a") + batch("b"))
        two.append("s", batch("c"))
        with pytest.raises(ConcurrentModification):
            one.replace("s", [], history.sequence)


def test_missing_parent_directories_are_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "memory.sqlite3"
    with SqliteStore(str(path)) as store:
        store.append("s", batch("a"))
    assert path.exists()


def test_memory_path_gives_a_private_database(tmp_path: Path) -> None:
    with SqliteStore(":memory:") as store, SqliteStore(":memory:") as other:
        store.append("s", batch("a"))
        assert store.load("s").sequence == 1
        assert other.sessions() == []


def test_a_file_from_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(MemoryStoreError, match="schema version 99") as info:
        SqliteStore(path)
    assert info.value.path == str(path)


def _garbage(path: Path) -> None:
    path.write_bytes(b"not a database" * 100)


def _directory(path: Path) -> None:
    path.mkdir()


def _truncated(path: Path) -> None:
    with SqliteStore(path) as store:
        for n in range(50):
            store.append(f"s{n % 5}", batch("x" * 1000))
    with open(path, "r+b") as file:
        file.truncate(os.path.getsize(path) // 2)


@pytest.mark.parametrize(
    ("make", "cause"),
    [
        (_garbage, "is not an SQLite database"),
        (_directory, "is a directory"),
        (_truncated, "is truncated or corrupt"),
    ],
)
def test_a_bad_file_is_refused_naming_its_path_and_the_cause(
    tmp_path: Path, make: Callable[[Path], None], cause: str
) -> None:
    path = tmp_path / "memory.sqlite3"
    make(path)
    with pytest.raises(MemoryStoreError) as info:
        SqliteStore(path)
    assert info.value.path == str(path)
    assert cause in info.value.cause
    assert str(path) in str(info.value) and cause in str(info.value)
    assert isinstance(info.value.__cause__, sqlite3.Error | None)


def _open_as(path: Path, uid: int | None) -> str:
    """Open a store on `path` (as user `uid` in a forked child, if given); describe the
    outcome as `"<ExceptionType>|<path>|<cause>"` or `"opened"`."""

    def attempt() -> str:
        try:
            SqliteStore(path).close()
        except MemoryStoreError as exc:
            return f"MemoryStoreError|{exc.path}|{exc.cause}"
        except BaseException as exc:
            return f"{type(exc).__name__}|{exc}"
        return "opened"

    if uid is None:
        return attempt()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop root, try, report through the pipe, never return
        try:
            os.close(read)
            os.setgid(uid)
            os.setuid(uid)
            os.write(write, attempt().encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        outcome = answer.read()
    os.waitpid(pid, 0)
    return outcome


def test_an_unreadable_file_is_refused_naming_its_path_and_the_cause() -> None:
    # root reads any file: as root, the store is opened by the user `nobody` in a child
    folder = Path(tempfile.mkdtemp(prefix="unreadable-"))  # in /tmp: `nobody` may pass
    try:
        folder.chmod(0o755)
        path = folder / "memory.sqlite3"
        SqliteStore(path).close()
        path.chmod(0)
        outcome = _open_as(path, 65534 if os.geteuid() == 0 else None)
        assert outcome.startswith("MemoryStoreError|"), outcome
        _, where, cause = outcome.split("|")
        assert where == str(path) and "permission denied" in cause
    finally:
        shutil.rmtree(folder)


def test_a_locked_file_is_reported_at_once_not_after_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    SqliteStore(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("COMMIT")  # exclusive locking mode keeps the file locked from now on
    outcome: list[BaseException | None] = []

    def open_it() -> None:
        try:
            SqliteStore(path, timeout=600).close()
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    try:
        threading.Thread(target=open_it, daemon=True).start()
        # the busy timeout is 600 s: reporting the lock within a minute means it was not waited
        wait_until(lambda: outcome, timeout=60)
    finally:
        holder.close()
    error = outcome[0]
    assert isinstance(error, MemoryStoreError), error
    assert error.path == str(path) and "locked" in error.cause


def test_an_up_to_date_file_opens_while_another_process_writes(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    SqliteStore(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # a writer of another process holds the write lock
    try:
        with SqliteStore(path, timeout=0) as store:
            assert store.load("s").sequence == 0
            with pytest.raises(MemoryStoreError, match="appending to session 's' failed") as info:
                store.append("s", batch("a"))
            assert info.value.path == str(path) and "locked" in info.value.cause
    finally:
        holder.close()


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"synchronous": "OFF"}, "synchronous"), ({"timeout": -1}, "timeout")],
)
def test_bad_settings_are_named(tmp_path: Path, kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        SqliteStore(tmp_path / "m.sqlite3", **kwargs)  # type: ignore[arg-type]
    assert not (tmp_path / "m.sqlite3").exists()


def test_closing_leaves_no_wal_behind(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    store = SqliteStore(path)
    store.append("s", batch("a"))
    assert Path(f"{path}-wal").exists()
    store.close()
    assert not Path(f"{path}-wal").exists()
    assert os.path.getsize(path) > 0


def test_a_call_waiting_for_a_locked_file_holds_up_no_other_call(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    store = SqliteStore(path, timeout=600)
    store.append("b", batch("b"))
    assert store._conn is not None
    began = threading.Event()
    store._conn.set_trace_callback(lambda sql: began.set() if sql == "BEGIN IMMEDIATE" else None)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writes, for long
    appended: list[BaseException | int] = []
    read: list[list[str]] = []

    def append() -> None:
        try:
            appended.append(store.append("a", batch("a")))
        except BaseException as exc:
            appended.append(exc)

    try:
        threading.Thread(target=append, daemon=True).start()
        wait_until(began.is_set, timeout=30)  # the append is waiting for the file's lock
        threading.Thread(target=lambda: read.append(texts(store.load("b").messages))).start()
        wait_until(lambda: read, timeout=30)
        assert read == [texts(batch("b"))] and not appended
    finally:
        holder.close()
    wait_until(lambda: appended, timeout=30)  # the lock is free: the append goes through
    assert appended == [1]
    store.close()


def test_a_call_gives_up_on_a_locked_file_at_its_timeout(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    SqliteStore(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with SqliteStore(path, timeout=0.05) as store:
            with pytest.raises(MemoryStoreError, match="appending to session 's' failed") as info:
                store.append("s", batch("a"))
            assert "locked" in info.value.cause
            assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    finally:
        holder.close()
    with SqliteStore(path) as store:
        assert store.load("s").sequence == 0  # nothing of the failed batch was stored


def test_a_runtime_on_a_bad_memory_file_fails_to_start_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    _garbage(path)
    with pytest.raises(MemoryStoreError, match="is not an SQLite database") as info:
        Runtime.start(RuntimeConfig.model_validate({"memory": {"path": str(path)}}))
    assert info.value.path == str(path)


# A file as version 1 of the schema wrote it (before sizes, change bases, the index and state).
_V1_SCHEMA = """
CREATE TABLE sessions (session TEXT PRIMARY KEY, sequence INTEGER NOT NULL,
                       live INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE messages (session TEXT NOT NULL, position INTEGER NOT NULL, seq INTEGER NOT NULL,
                       json TEXT NOT NULL, PRIMARY KEY (session, position));
PRAGMA user_version = 1;
"""


def test_a_file_of_schema_version_1_is_upgraded_keeping_every_history(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    old = batch("é", 2) + batch("b", 1)
    with sqlite3.connect(path) as conn:
        conn.executescript(_V1_SCHEMA)
        conn.executemany(
            "INSERT INTO messages VALUES ('s', ?, ?, ?)",
            [(i, 1 if i < 2 else 2, m.model_dump_json()) for i, m in enumerate(old)],
        )
        conn.execute("INSERT INTO sessions VALUES ('s', 2, 1)")
    with SqliteStore(path) as store:
        history = store.load("s")
        assert history.messages == old and history.sequence == 2
        assert history.bytes == sum(len(m.model_dump_json().encode()) for m in old)
        # Its last compaction is unknown: an older reader gets the whole history.
        assert store.changes("s", 1).replaced
        store.append("s", batch("new", 1))
        assert store.changes("s", 2).messages == batch("new", 1)
        store.state_put("s", "k", "1")
        assert store.state_get("s", "k") == "1"
    with sqlite3.connect(path) as conn:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
    assert version == 2


def _vm_steps(store: SqliteStore, call: Callable[[], object]) -> int:
    """The SQLite virtual-machine instructions `call` runs on the store's connection."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    assert store._conn is not None
    store._conn.set_progress_handler(count, 1)
    try:
        call()
    finally:
        store._conn.set_progress_handler(None, 1)
    return steps


def test_changes_costs_the_same_after_a_short_or_a_long_history(tmp_path: Path) -> None:
    # Deterministic stand-in for "flat in history length": the same number of SQLite
    # instructions reads the same new messages after 10 or after 2000 older appends.
    costs = []
    for prefix in (10, 2000):
        with SqliteStore(tmp_path / f"{prefix}.sqlite3", synchronous="NORMAL") as store:
            for n in range(prefix):
                store.append("s", batch(f"old{n}", 2))
            since = store.load("s").sequence
            store.append("s", batch("new", 3))
            assert texts(store.changes("s", since).messages) == texts(batch("new", 3))
            costs.append(_vm_steps(store, functools.partial(store.changes, "s", since)))
    assert costs[0] == costs[1]
