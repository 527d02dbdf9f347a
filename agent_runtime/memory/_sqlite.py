"""SqliteStore: durable session histories in one SQLite file (WAL mode)."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Literal, get_args

import structlog

from agent_runtime._errors import ConcurrentModification
from agent_runtime.memory._models import SessionHistory, history
from agent_runtime.memory._store import check_messages, check_sequence, check_session
from agent_runtime.messages import Message, MessageListAdapter

log = structlog.get_logger(__name__)

Synchronous = Literal["FULL", "NORMAL"]
"""SQLite's `PRAGMA synchronous` levels a `SqliteStore` accepts."""
_SYNCHRONOUS: tuple[str, ...] = get_args(Synchronous)

SCHEMA_VERSION = 1
"""The `PRAGMA user_version` of the files this code writes (newer files are refused)."""

# `messages` keeps a rowid (the default): rows hold whole messages, often larger than the
# ~200 bytes WITHOUT ROWID tables are meant for. `seq` records the change that wrote a row.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session  TEXT PRIMARY KEY,
    sequence INTEGER NOT NULL,
    live     INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS messages (
    session  TEXT NOT NULL,
    position INTEGER NOT NULL,
    seq      INTEGER NOT NULL,
    json     TEXT NOT NULL,
    PRIMARY KEY (session, position)
);
"""

_UPSERT_SESSION = (
    "INSERT INTO sessions (session, sequence, live) VALUES (?, ?, 1) "
    "ON CONFLICT (session) DO UPDATE SET sequence = excluded.sequence, live = 1"
)
_INSERT_MESSAGE = "INSERT INTO messages (session, position, seq, json) VALUES (?, ?, ?, ?)"


class SqliteStore:
    """A `MemoryStore` in one SQLite file: the default, durable store of session memory.

    Durability: the file is in WAL mode and every change is one transaction (`BEGIN IMMEDIATE`
    ... `COMMIT`), so a batch is stored whole or not at all. With `synchronous="FULL"` (the
    default) each commit syncs the WAL to disk before `append` / `replace` / `delete` returns:
    a change whose call returned survives a crash of the process and also a power loss or OS
    crash, as far as the OS and disk honour fsync (on macOS SQLite's costlier `fullfsync` is
    not enabled). The price is one fsync per change, negligible next to a model call.
    `synchronous="NORMAL"` skips that sync: still never loses a committed change to a process
    crash (the WAL is in the OS's page cache), and the file stays consistent after a power
    loss, but the last changes before it may be rolled back.

    Threading: one connection (`check_same_thread=False`) guarded by one lock, held for exactly
    one transaction and never while calling anything but SQLite; JSON is encoded and decoded
    outside it. SQLite admits one writer at a time anyway, and the transaction state of a
    connection is shared, so threads must serialise on it; a connection per thread would let
    reads overlap, but would cost a file descriptor and WAL mapping per thread (one per agent),
    could not be closed from `close()`, and would give each thread a different `":memory:"`
    database. Several processes may share the file: writers wait up to `timeout` seconds for
    each other (SQLite's busy timeout), and sequences stay consistent across them.

    Messages are stored as their JSON (`model_dump_json`) and read back as equal models.
    `path` may be a str or path-like; missing parent directories are created; `":memory:"`
    gives a private database that lives as long as the store. WAL needs a local file system
    (not NFS/SMB).

    Raises:
        ValueError: `synchronous` or `timeout` is invalid, or the file was written by a newer
            schema than this code reads.
        sqlite3.Error: the file cannot be opened or is not an SQLite database.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "FULL",
        timeout: float = 5.0,
    ) -> None:
        if synchronous not in _SYNCHRONOUS:
            raise ValueError(
                f"unknown synchronous {synchronous!r} (expected one of: {', '.join(_SYNCHRONOUS)})"
            )
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
            raise ValueError(f"invalid timeout {timeout!r} (expected seconds >= 0)")
        self.path = path if path == ":memory:" else Path(path)
        if isinstance(self.path, Path):
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.synchronous = synchronous
        self._lock = threading.Lock()
        conn = sqlite3.connect(
            self.path, timeout=timeout, isolation_level=None, check_same_thread=False
        )
        try:
            self._conn: sqlite3.Connection | None = conn
            self._setup(conn)
        except BaseException:
            conn.close()
            self._conn = None
            raise
        log.debug("memory.sqlite.opened", path=str(self.path), synchronous=synchronous)

    def _setup(self, conn: sqlite3.Connection) -> None:
        (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
        if mode not in ("wal", "memory"):
            log.warning("memory.sqlite.wal_unavailable", path=str(self.path), journal_mode=mode)
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        with self._transaction(write=True) as c:
            (version,) = c.execute("PRAGMA user_version").fetchone()
            if version > SCHEMA_VERSION:
                raise ValueError(
                    f"memory file {str(self.path)!r} has schema version {version}; this "
                    f"agent_runtime reads up to version {SCHEMA_VERSION}"
                )
            if version < SCHEMA_VERSION:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        c.execute(statement)
                c.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def load(self, session: str) -> SessionHistory:
        """See `MemoryStore.load` (one read transaction: a consistent snapshot)."""
        check_session(session)
        with self._transaction(write=False) as conn:
            sequence = _sequence(conn, session)
            rows = conn.execute(
                "SELECT json FROM messages WHERE session = ? ORDER BY position", (session,)
            ).fetchall()
        messages = MessageListAdapter.validate_json("[" + ",".join(r[0] for r in rows) + "]")
        return history(messages, sequence)

    def append(self, session: str, messages: Iterable[Message]) -> int:
        """See `MemoryStore.append` (one transaction, synced per `synchronous`)."""
        check_session(session)
        payloads = [m.model_dump_json() for m in check_messages(messages)]
        if not payloads:
            with self._transaction(write=False) as conn:
                return _sequence(conn, session)
        with self._transaction(write=True) as conn:
            sequence = _sequence(conn, session) + 1
            (start,) = conn.execute(
                "SELECT COALESCE(MAX(position) + 1, 0) FROM messages WHERE session = ?",
                (session,),
            ).fetchone()
            conn.executemany(
                _INSERT_MESSAGE,
                [(session, start + i, sequence, p) for i, p in enumerate(payloads)],
            )
            conn.execute(_UPSERT_SESSION, (session, sequence))
        return sequence

    def replace(self, session: str, messages: Iterable[Message], expected_sequence: int) -> int:
        """See `MemoryStore.replace` (one transaction: the check and the swap are atomic)."""
        check_session(session)
        payloads = [m.model_dump_json() for m in check_messages(messages)]
        check_sequence(expected_sequence)
        with self._transaction(write=True) as conn:
            actual = _sequence(conn, session)
            if actual != expected_sequence:
                raise ConcurrentModification(session, expected_sequence, actual)
            sequence = actual + 1
            conn.execute("DELETE FROM messages WHERE session = ?", (session,))
            conn.executemany(
                _INSERT_MESSAGE, [(session, i, sequence, p) for i, p in enumerate(payloads)]
            )
            conn.execute(_UPSERT_SESSION, (session, sequence))
        return sequence

    def sessions(self) -> list[str]:
        """See `MemoryStore.sessions`."""
        with self._transaction(write=False) as conn:
            rows = conn.execute("SELECT session FROM sessions WHERE live = 1").fetchall()
        return sorted(r[0] for r in rows)

    def delete(self, session: str) -> int | None:
        """See `MemoryStore.delete` (the rows are deleted; the session keeps a sequence row)."""
        check_session(session)
        with self._transaction(write=True) as conn:
            row = conn.execute(
                "SELECT sequence, live FROM sessions WHERE session = ?", (session,)
            ).fetchone()
            if row is None or not row[1]:
                return None
            sequence = int(row[0]) + 1
            conn.execute("DELETE FROM messages WHERE session = ?", (session,))
            conn.execute(
                "UPDATE sessions SET sequence = ?, live = 0 WHERE session = ?", (sequence, session)
            )
        return sequence

    def close(self) -> None:
        """Close the connection (SQLite then checkpoints the WAL into the file); later calls
        raise `ValueError`. Idempotent; waits for a transaction in progress to finish."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
                log.debug("memory.sqlite.closed", path=str(self.path))

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<SqliteStore path={str(self.path)!r} closed={self._conn is None}>"

    @contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """One transaction under the lock; committed on success, rolled back on any error.

        `BEGIN IMMEDIATE` takes the write lock at once, so two writers never deadlock trying
        to upgrade a read lock (they wait up to the busy timeout instead).
        """
        with self._lock:
            conn = self._conn
            if conn is None:
                raise ValueError(f"the memory store {str(self.path)!r} is closed")
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.rollback()
                raise


def _sequence(conn: sqlite3.Connection, session: str) -> int:
    row = conn.execute("SELECT sequence FROM sessions WHERE session = ?", (session,)).fetchone()
    return 0 if row is None else int(row[0])
