"""SqliteStore: durable session histories in one SQLite file (WAL mode)."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Literal, get_args

from agent_runtime._errors import ConcurrentModification, MemoryStoreError
from agent_runtime.memory._models import SessionChanges, SessionHistory, changes, history
from agent_runtime.memory._sqlite_errors import describe, is_busy
from agent_runtime.memory._sqlite_schema import SCHEMA_VERSION, upgrade
from agent_runtime.memory._store import (
    check_key,
    check_messages,
    check_sequence,
    check_session,
    check_texts,
    is_replaced,
)
from agent_runtime.messages import Message, MessageListAdapter
from supervisors._log import get_logger

log = get_logger(__name__)

Synchronous = Literal["FULL", "NORMAL"]
"""SQLite's `PRAGMA synchronous` levels a `SqliteStore` accepts."""
_SYNCHRONOUS: tuple[str, ...] = get_args(Synchronous)

OPEN_BUSY_TIMEOUT = 0.5
"""The longest opening a store waits for a lock on its file, whatever the store's `timeout`.

An up-to-date file in WAL mode opens without a write lock, so writers of other processes never
delay it; only a new file (its schema is created) or one held locked (another connection's
exclusive locking mode, a long transaction of a non-WAL file) needs one. A lock held longer
than this is reported at once as `MemoryStoreError` instead of after the busy timeout."""

_UPSERT_SESSION = (
    "INSERT INTO sessions (session, sequence, live, bytes, base) VALUES (?, ?, 1, ?, ?) "
    "ON CONFLICT (session) DO UPDATE SET sequence = excluded.sequence, live = 1, "
    "bytes = excluded.bytes, base = excluded.base"
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
    database. Several processes may share the file, and sequences stay consistent across them:
    a call waits up to `timeout` seconds for another connection's lock on the file, and waits
    with the store's lock released (it retries, backing off from 1 ms to 100 ms), so a file
    held locked by another process delays only the calls that need that lock: reads of a WAL
    file go on meanwhile, and each waiting call gives up at its own deadline rather than
    queueing behind the others' (SQLite's own busy handler would wait holding the lock).

    Messages are stored as their JSON (`model_dump_json`) and read back as equal models.
    `path` may be a str or path-like; missing parent directories are created; `":memory:"`
    gives a private database that lives as long as the store. WAL needs a local file system
    (not NFS/SMB).

    Raises:
        ValueError: `synchronous` or `timeout` is invalid.
        MemoryStoreError: the file cannot be opened as session memory: it is not an SQLite
            database, is a directory, cannot be read or written, is truncated or corrupt,
            was written by a newer schema than this code reads, or stays locked by another
            connection for longer than `OPEN_BUSY_TIMEOUT` (the busy `timeout` is for
            changes, not for opening). The message names the path and the cause. The same
            error reports a change or a read that SQLite refuses later (e.g. `database is
            locked` after `timeout` seconds, a full disk).
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
        self.synchronous = synchronous
        self.timeout = float(timeout)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = self._open(timeout)
        log.debug("memory.sqlite.opened", path=str(self.path), synchronous=synchronous)

    def _open(self, timeout: float) -> sqlite3.Connection:
        """A connection to the file, set up (WAL, sync level, schema)."""
        if isinstance(self.path, Path):
            try:
                is_dir = self.path.is_dir()
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise MemoryStoreError(
                    str(self.path), f"cannot be opened: its directory cannot be made ({exc})"
                ) from exc
            if is_dir:
                raise MemoryStoreError(
                    str(self.path), "cannot be opened: it is a directory, not a database file"
                )
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=min(timeout, OPEN_BUSY_TIMEOUT),
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise self._error(exc, "cannot be opened") from exc
        try:
            self._setup(conn)
            conn.execute("PRAGMA busy_timeout = 0")  # from now on, _begin waits for locks
        except sqlite3.Error as exc:
            conn.close()
            raise self._error(exc, "cannot be opened") from exc
        except BaseException:
            conn.close()
            raise
        return conn

    def _setup(self, conn: sqlite3.Connection) -> None:
        """WAL mode, the sync level and the schema. A file already in WAL mode at the current
        schema is only read, so opening it never waits for writers of other processes."""
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
        if mode not in ("wal", "memory"):
            (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            if mode not in ("wal", "memory"):
                log.warning("memory.sqlite.wal_unavailable", path=str(self.path), journal_mode=mode)
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        with _transaction_on(conn, write=False):
            version = self._schema_version(conn)
        if version < SCHEMA_VERSION:
            with _transaction_on(conn, write=True):
                version = self._schema_version(conn)  # another process may have done it
                if version < SCHEMA_VERSION:
                    upgrade(conn, version)

    def _schema_version(self, conn: sqlite3.Connection) -> int:
        """The file's schema version. Reading it checks the header against the file's size,
        so a file cut short fails here (`database disk image is malformed`).

        Raises:
            MemoryStoreError: a newer schema than this code reads.
        """
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        if version > SCHEMA_VERSION:
            raise MemoryStoreError(
                str(self.path),
                f"cannot be opened: it has schema version {version}; this agent_runtime "
                f"reads up to version {SCHEMA_VERSION}",
            )
        return int(version)

    def load(self, session: str) -> SessionHistory:
        """See `MemoryStore.load` (one read transaction: a consistent snapshot)."""
        check_session(session)
        with self._transaction(f"reading session {session!r}", write=False) as conn:
            sequence, size, _, _ = _session_row(conn, session)
            rows = conn.execute(
                "SELECT json FROM messages WHERE session = ? ORDER BY position", (session,)
            ).fetchall()
        return history(_decode(rows), sequence, size)

    def changes(self, session: str, since: int) -> SessionChanges:
        """See `MemoryStore.changes` (one read transaction; the rows after `since` are found
        through the index of the change that wrote them)."""
        check_session(session)
        check_sequence(since, "since")
        with self._transaction(f"reading session {session!r}", write=False) as conn:
            sequence, _, base, _ = _session_row(conn, session)
            replaced = is_replaced(since, sequence, base)
            rows = conn.execute(
                "SELECT json FROM messages WHERE session = ? AND seq > ? ORDER BY seq, position",
                (session, 0 if replaced else since),
            ).fetchall()
        return changes(_decode(rows), sequence, replaced=replaced)

    def append(self, session: str, messages: Iterable[Message]) -> int:
        """See `MemoryStore.append` (one transaction, synced per `synchronous`)."""
        check_session(session)
        payloads = [m.model_dump_json() for m in check_messages(messages)]
        if not payloads:
            with self._transaction(f"reading session {session!r}", write=False) as conn:
                return _session_row(conn, session)[0]
        added = sum(len(p.encode()) for p in payloads)
        with self._transaction(f"appending to session {session!r}", write=True) as conn:
            sequence, size, base, _ = _session_row(conn, session)
            sequence, size = sequence + 1, size + added
            (start,) = conn.execute(
                "SELECT COALESCE(MAX(position) + 1, 0) FROM messages WHERE session = ?",
                (session,),
            ).fetchone()
            conn.executemany(
                _INSERT_MESSAGE,
                [(session, start + i, sequence, p) for i, p in enumerate(payloads)],
            )
            conn.execute(_UPSERT_SESSION, (session, sequence, size, base))
        return sequence

    def replace(self, session: str, messages: Iterable[Message], expected_sequence: int) -> int:
        """See `MemoryStore.replace` (one transaction: the check and the swap are atomic)."""
        check_session(session)
        payloads = [m.model_dump_json() for m in check_messages(messages)]
        check_sequence(expected_sequence)
        size = sum(len(p.encode()) for p in payloads)
        with self._transaction(f"compacting session {session!r}", write=True) as conn:
            actual, _, _, _ = _session_row(conn, session)
            if actual != expected_sequence:
                raise ConcurrentModification(session, expected_sequence, actual)
            sequence = actual + 1
            conn.execute("DELETE FROM messages WHERE session = ?", (session,))
            conn.executemany(
                _INSERT_MESSAGE, [(session, i, sequence, p) for i, p in enumerate(payloads)]
            )
            conn.execute(_UPSERT_SESSION, (session, sequence, size, sequence))
        return sequence

    def sessions(self) -> list[str]:
        """See `MemoryStore.sessions`."""
        with self._transaction("listing sessions", write=False) as conn:
            rows = conn.execute("SELECT session FROM sessions WHERE live = 1").fetchall()
        return sorted(r[0] for r in rows)

    def delete(self, session: str) -> int | None:
        """See `MemoryStore.delete` (the rows are deleted; the session keeps a sequence row)."""
        check_session(session)
        with self._transaction(f"deleting session {session!r}", write=True) as conn:
            sequence, _, _, live = _session_row(conn, session)
            if not live:
                return None
            sequence += 1
            conn.execute("DELETE FROM messages WHERE session = ?", (session,))
            conn.execute(
                "UPDATE sessions SET sequence = ?, live = 0, bytes = 0, base = ? WHERE session = ?",
                (sequence, sequence, session),
            )
        return sequence

    def state_get(self, session: str, key: str) -> str | None:
        """See `MemoryStore.state_get`."""
        check_session(session)
        check_key(key)
        with self._transaction(f"reading the state of session {session!r}", write=False) as c:
            row = c.execute(
                "SELECT value FROM state WHERE session = ? AND key = ?", (session, key)
            ).fetchone()
        return None if row is None else str(row[0])

    def state_put(self, session: str, key: str, value: str) -> None:
        """See `MemoryStore.state_put` (one transaction, synced per `synchronous`)."""
        check_session(session)
        check_key(key)
        with self._transaction(f"writing the state of session {session!r}", write=True) as c:
            c.execute(
                "INSERT INTO state (session, key, value) VALUES (?, ?, ?) "
                "ON CONFLICT (session, key) DO UPDATE SET value = excluded.value",
                (session, key, value),
            )

    def state_delete(self, session: str, key: str) -> bool:
        """See `MemoryStore.state_delete`."""
        check_session(session)
        check_key(key)
        with self._transaction(f"writing the state of session {session!r}", write=True) as c:
            deleted = c.execute(
                "DELETE FROM state WHERE session = ? AND key = ?", (session, key)
            ).rowcount
        return deleted > 0

    def state_compare_and_set(
        self, session: str, key: str, expected: str | None, value: str
    ) -> bool:
        """See `MemoryStore.state_compare_and_set` (one write transaction: the read and the
        write hold the file's write lock, so no other connection or process writes between)."""
        check_session(session)
        check_key(key)
        check_texts(expected, value)
        with self._transaction(f"writing the state of session {session!r}", write=True) as c:
            row = c.execute(
                "SELECT value FROM state WHERE session = ? AND key = ?", (session, key)
            ).fetchone()
            if (None if row is None else str(row[0])) != expected:
                return False
            c.execute(
                "INSERT INTO state (session, key, value) VALUES (?, ?, ?) "
                "ON CONFLICT (session, key) DO UPDATE SET value = excluded.value",
                (session, key, value),
            )
        return True

    def state_items(self, session: str) -> dict[str, str]:
        """See `MemoryStore.state_items` (one read transaction)."""
        check_session(session)
        with self._transaction(f"reading the state of session {session!r}", write=False) as c:
            rows = c.execute("SELECT key, value FROM state WHERE session = ?", (session,))
            return {str(key): str(value) for key, value in rows}

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
    def _transaction(self, what: str, *, write: bool) -> Iterator[sqlite3.Connection]:
        """One transaction under the lock; committed on success, rolled back on any error.

        `BEGIN IMMEDIATE` takes the write lock at once, so two writers never deadlock trying
        to upgrade a read lock (they wait up to the timeout instead).

        Raises:
            MemoryStoreError: SQLite failed (`what` names the operation in the message).
            ValueError: the store is closed.
        """
        deadline = time.monotonic() + self.timeout
        conn = self._begin(what, write=write, deadline=deadline)
        try:
            try:
                yield conn
                _retry_busy(lambda: conn.execute("COMMIT"), deadline)
            except BaseException:
                if conn.in_transaction:
                    conn.rollback()
                raise
        except sqlite3.Error as exc:
            raise self._error(exc, f"{what} failed") from exc
        finally:
            self._lock.release()

    def _begin(self, what: str, *, write: bool, deadline: float) -> sqlite3.Connection:
        """Begin a transaction; return its connection with `self._lock` held.

        While another connection holds the file locked, retry until `deadline`, backing off,
        with `self._lock` released in between: the store's other calls go on meanwhile.
        """
        backoff = iter(_BACKOFF)
        while True:
            self._lock.acquire()
            conn = self._conn
            try:
                if conn is None:
                    raise ValueError(f"the memory store {str(self.path)!r} is closed")
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                if not write:  # a deferred BEGIN locks nothing: take the read snapshot here
                    conn.execute("PRAGMA schema_version").fetchone()
                return conn
            except sqlite3.Error as exc:
                self._abandon(conn)
                left = deadline - time.monotonic()
                if not is_busy(exc) or left <= 0:
                    raise self._error(exc, f"{what} failed") from exc
            except BaseException:
                self._abandon(conn)
                raise
            time.sleep(min(next(backoff, _BACKOFF[-1]), left))

    def _abandon(self, conn: sqlite3.Connection | None) -> None:
        """Roll back what `_begin` began on `conn`, and release the lock."""
        try:
            if conn is not None and conn.in_transaction:
                conn.rollback()
        finally:
            self._lock.release()

    def _error(self, exc: sqlite3.Error, failed: str) -> MemoryStoreError:
        """`exc` as a MemoryStoreError naming this store's file, what failed and why."""
        return MemoryStoreError(str(self.path), f"{failed}: {describe(exc, self.path)}")


_BACKOFF = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1)
"""Seconds between attempts to take a lock another connection holds (then 0.1 each)."""


def _retry_busy(statement: Callable[[], object], deadline: float) -> None:
    """Run `statement`, retrying it while the file is busy, until `deadline`."""
    backoff = iter(_BACKOFF)
    while True:
        try:
            statement()
            return
        except sqlite3.OperationalError as exc:
            left = deadline - time.monotonic()
            if not is_busy(exc) or left <= 0:
                raise
        time.sleep(min(next(backoff, _BACKOFF[-1]), left))


@contextmanager
def _transaction_on(conn: sqlite3.Connection, *, write: bool) -> Iterator[None]:
    """One transaction on `conn`: committed on success, rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise


def _session_row(conn: sqlite3.Connection, session: str) -> tuple[int, int, int, bool]:
    """The session's (sequence, bytes, base, live); (0, 0, 0, False) if it has no row."""
    row = conn.execute(
        "SELECT sequence, bytes, base, live FROM sessions WHERE session = ?", (session,)
    ).fetchone()
    if row is None:
        return 0, 0, 0, False
    return int(row[0]), int(row[1]), int(row[2]), bool(row[3])


def _decode(rows: list[tuple[str]]) -> list[Message]:
    """The messages of `rows` of JSON text, in one parse."""
    return MessageListAdapter.validate_json("[" + ",".join(r[0] for r in rows) + "]")
