"""PostgresStore: session histories on a PostgreSQL server, shared by several processes."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from agent_runtime._errors import ConcurrentModification, MemoryStoreError
from agent_runtime.memory._models import SessionChanges, SessionHistory, changes, history
from agent_runtime.memory._pg_pool import Pool, PoolClosed, PoolTimeout
from agent_runtime.memory._postgres_dsn import Dsn, parse
from agent_runtime.memory._postgres_sql import (
    APPEND,
    CHANGES,
    CLAIM,
    DELETE_MESSAGES,
    INSERT_MESSAGES,
    LOAD,
    LOCK,
    LOCK_SCHEMA,
    SCHEMA_VERSION,
    TABLES,
    UPDATE_SESSION,
)
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

if TYPE_CHECKING:
    import psycopg

log = get_logger(__name__)

T = TypeVar("T")

INSTALL_HINT = "pip install 'agent-runtime[postgres]'"
"""How to get psycopg 3, which `PostgresStore` needs (an optional dependency)."""


class PostgresStore:
    """A `MemoryStore` on a PostgreSQL server: one history per session shared by every
    process that opens a store on the same database (same semantics as `SqliteStore`).

    `dsn` is a libpq connection string (`"host=db user=agent dbname=agents"`) or URI
    (`"postgresql://agent:secret@db/agents"`); what it leaves out comes from libpq's `PG*`
    environment variables and `~/.pgpass`. The tables (`agent_runtime_sessions`,
    `agent_runtime_messages`, `agent_runtime_state`, `agent_runtime_schema`) are created
    on first use in the first schema of the connection's `search_path`.

    Guarantees:
    - every change is one transaction, committed before the call returns: what a call
      returned survives a crash of this process and, as far as the server's own settings
      (`fsync`, `synchronous_commit`) promise, of the server;
    - changes to one session are serialised by its row in `agent_runtime_sessions` (a row
      lock), so sequences stay gap-free and batches whole and in commit order across
      processes; sessions never wait for each other;
    - a read is one statement: it sees the history as of one committed change;
    - the password in `dsn` never appears in an error or a log line: `MemoryStoreError`
      names the store by its DSN without the password (`self.dsn.display`), and texts from
      the driver or the server are scrubbed of it.

    Threading: up to `pool_size` connections (4) made on demand and reused, each used by one
    call at a time, so that a call waiting for a session's row lock holds up only calls
    that find no free connection. A call waits up to `timeout` seconds for a free
    connection, to connect, and for a lock another connection holds (the server's
    `lock_timeout`); no statement runs longer than `statement_timeout` seconds. A read that
    finds its reused connection broken (the server restarted) is retried once on a new
    one; a change never is (it may have been committed), its error reaches the caller.

    Raises:
        TypeError, ValueError: `dsn` is not a str, or a bad `timeout`, `statement_timeout`
            or `pool_size`.
        ImportError: psycopg 3 is not installed (`pip install 'agent-runtime[postgres]'`).
        MemoryStoreError: the DSN does not parse, the server cannot be reached or refuses
            the connection, or its tables were made by a newer agent_runtime. The message
            names the DSN (without the password) and the cause; the same error reports a
            change or a read the server refuses later (a lock held past `timeout`, a lost
            connection, a full disk).
    """

    def __init__(
        self,
        dsn: str,
        *,
        timeout: float = 5.0,
        statement_timeout: float = 60.0,
        pool_size: int = 4,
    ) -> None:
        if not isinstance(dsn, str):
            raise TypeError(
                f"invalid dsn of type {type(dsn).__name__} (expected a str: a libpq "
                "connection string or a postgresql:// URI)"
            )
        for name, value in (("timeout", timeout), ("statement_timeout", statement_timeout)):
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ValueError(f"invalid {name} {value!r} (expected finite seconds >= 0)")
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ValueError(f"invalid pool_size {pool_size!r} (expected an int >= 1)")
        self._pg = _load_psycopg()
        try:
            self.dsn: Dsn = parse(dsn, self._pg.conninfo.conninfo_to_dict)
        except ValueError as exc:
            raise MemoryStoreError(
                "postgresql DSN", f"cannot be opened: the DSN does not parse ({exc})"
            ) from None
        self.timeout = float(timeout)
        self.statement_timeout = float(statement_timeout)
        self._pool = Pool(self._connect, pool_size)
        try:
            self._run("cannot be opened", self._setup, read=False)
        except BaseException:
            self._pool.close()
            raise
        log.debug("memory.postgres.opened", dsn=self.dsn.display, pool_size=pool_size)

    @property
    def path(self) -> str:
        """The store's name in errors: its DSN without the password."""
        return self.dsn.display

    # -- the MemoryStore protocol -------------------------------------------------------------

    def load(self, session: str) -> SessionHistory:
        """See `MemoryStore.load` (one statement: a consistent snapshot)."""
        _check_text(check_session(session), "session")
        return self._run(f"reading session {session!r} failed", lambda c: _load(c, session))

    def changes(self, session: str, since: int) -> SessionChanges:
        """See `MemoryStore.changes` (one statement, through the index of the change that
        wrote each row; a second one only for a reader ahead of the store)."""
        _check_text(check_session(session), "session")
        check_sequence(since, "since")
        return self._run(
            f"reading session {session!r} failed", lambda c: _changes(c, session, since)
        )

    def append(self, session: str, messages: Iterable[Message]) -> int:
        """See `MemoryStore.append` (one statement, committed before it returns)."""
        _check_text(check_session(session), "session")
        payloads = [m.model_dump_json() for m in check_messages(messages)]
        if not payloads:
            return self._run(
                f"reading session {session!r} failed",
                lambda c: _sequence(c, session),
            )

        def append(conn: psycopg.Connection[Any]) -> int:
            params = {
                "session": session,
                "json": payloads,
                "count": len(payloads),
                "bytes": sum(len(p.encode()) for p in payloads),
            }
            row = conn.execute(APPEND, params).fetchone()
            assert row is not None
            return int(row[0])

        return self._run(f"appending to session {session!r} failed", append, read=False)

    def replace(self, session: str, messages: Iterable[Message], expected_sequence: int) -> int:
        """See `MemoryStore.replace` (one transaction: the check and the swap are atomic)."""
        _check_text(check_session(session), "session")
        payloads = [m.model_dump_json() for m in check_messages(messages)]
        check_sequence(expected_sequence)
        size = sum(len(p.encode()) for p in payloads)

        def replace(conn: psycopg.Connection[Any]) -> int:
            with conn.transaction():
                conn.execute(CLAIM, (session,))
                actual, _ = _lock(conn, session)
                if actual != expected_sequence:
                    raise ConcurrentModification(session, expected_sequence, actual)
                sequence = actual + 1
                conn.execute(DELETE_MESSAGES, (session,))
                conn.execute(INSERT_MESSAGES, (session, sequence, payloads))
                conn.execute(
                    UPDATE_SESSION, (sequence, True, size, sequence, len(payloads), session)
                )
            return sequence

        return self._run(f"compacting session {session!r} failed", replace, read=False)

    def sessions(self) -> list[str]:
        """See `MemoryStore.sessions`."""

        def sessions(conn: psycopg.Connection[Any]) -> list[str]:
            rows = conn.execute("SELECT session FROM agent_runtime_sessions WHERE live")
            return sorted(str(row[0]) for row in rows)

        return self._run("listing sessions failed", sessions)

    def delete(self, session: str) -> int | None:
        """See `MemoryStore.delete` (the rows are deleted; the session keeps a sequence row)."""
        _check_text(check_session(session), "session")

        def delete(conn: psycopg.Connection[Any]) -> int | None:
            with conn.transaction():
                sequence, live = _lock(conn, session)
                if not live:
                    return None
                sequence += 1
                conn.execute(DELETE_MESSAGES, (session,))
                conn.execute(UPDATE_SESSION, (sequence, False, 0, sequence, 0, session))
            return sequence

        return self._run(f"deleting session {session!r} failed", delete, read=False)

    def state_get(self, session: str, key: str) -> str | None:
        """See `MemoryStore.state_get`."""
        self._check_state(session, key)

        def get(conn: psycopg.Connection[Any]) -> str | None:
            row = conn.execute(
                "SELECT value FROM agent_runtime_state WHERE session = %s AND key = %s",
                (session, key),
            ).fetchone()
            return None if row is None else str(row[0])

        return self._run(f"reading the state of session {session!r} failed", get)

    def state_put(self, session: str, key: str, value: str) -> None:
        """See `MemoryStore.state_put` (one statement, committed before it returns)."""
        self._check_state(session, key)

        def put(conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "INSERT INTO agent_runtime_state (session, key, value) VALUES (%s, %s, %s) "
                "ON CONFLICT (session, key) DO UPDATE SET value = EXCLUDED.value",
                (session, key, value),
            )

        self._run(f"writing the state of session {session!r} failed", put, read=False)

    def state_delete(self, session: str, key: str) -> bool:
        """See `MemoryStore.state_delete`."""
        self._check_state(session, key)

        def delete(conn: psycopg.Connection[Any]) -> bool:
            cursor = conn.execute(
                "DELETE FROM agent_runtime_state WHERE session = %s AND key = %s",
                (session, key),
            )
            return cursor.rowcount > 0

        return self._run(f"writing the state of session {session!r} failed", delete, read=False)

    def state_compare_and_set(
        self, session: str, key: str, expected: str | None, value: str
    ) -> bool:
        """See `MemoryStore.state_compare_and_set` (one statement: an insert that does nothing
        when the key exists, or an update whose condition the server checks again on the
        locked row, so of two concurrent calls with one `expected` only one matches)."""
        self._check_state(session, key)
        check_texts(expected, value)
        _check_text(value, "session state value")

        def cas(conn: psycopg.Connection[Any]) -> bool:
            if expected is None:
                cursor = conn.execute(
                    "INSERT INTO agent_runtime_state (session, key, value) VALUES (%s, %s, %s) "
                    "ON CONFLICT (session, key) DO NOTHING",
                    (session, key, value),
                )
            else:
                cursor = conn.execute(
                    "UPDATE agent_runtime_state SET value = %s "
                    "WHERE session = %s AND key = %s AND value = %s",
                    (value, session, key, expected),
                )
            return cursor.rowcount == 1

        return self._run(f"writing the state of session {session!r} failed", cas, read=False)

    def state_items(self, session: str) -> dict[str, str]:
        """See `MemoryStore.state_items` (one statement)."""
        _check_text(check_session(session), "session")

        def items(conn: psycopg.Connection[Any]) -> dict[str, str]:
            rows = conn.execute(
                "SELECT key, value FROM agent_runtime_state WHERE session = %s", (session,)
            )
            return {str(key): str(value) for key, value in rows}

        return self._run(f"reading the state of session {session!r} failed", items)

    def close(self) -> None:
        """Close the connections (those in use once their call ends); later calls raise
        `ValueError`. Idempotent."""
        if not self._pool.closed:
            self._pool.close()
            log.debug("memory.postgres.closed", dsn=self.dsn.display)

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<PostgresStore dsn={self.dsn.display!r} closed={self._pool.closed}>"

    # -- connections, errors ------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        """A new autocommit connection with this store's timeouts."""
        extra: dict[str, Any] = {}
        if "connect_timeout" not in self.dsn.params:  # libpq's minimum is 2 s
            extra["connect_timeout"] = max(2, math.ceil(self.timeout))
        if "application_name" not in self.dsn.params:
            extra["application_name"] = "agent-runtime"
        conn: psycopg.Connection[Any] = self._pg.connect(
            self.dsn.conninfo, autocommit=True, **extra
        )
        try:
            # lock_timeout 0 would mean "wait forever": 1 ms is "do not wait".
            conn.execute(
                "SELECT set_config('lock_timeout', %s, false), "
                "set_config('statement_timeout', %s, false)",
                (_ms(self.timeout), _ms(self.statement_timeout)),
            )
        except BaseException:
            conn.close()
            raise
        return conn

    def _setup(self, conn: psycopg.Connection[Any]) -> None:
        """Create the tables unless they exist (under an advisory lock, so processes opening
        a new database at once do not race), and refuse tables of a newer schema."""
        with conn.transaction():
            conn.execute(LOCK_SCHEMA)
            row = conn.execute("SELECT to_regclass('agent_runtime_schema')").fetchone()
            if row is None or row[0] is None:
                for statement in TABLES:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO agent_runtime_schema (version) VALUES (%s)", (SCHEMA_VERSION,)
                )
                return
            found = conn.execute("SELECT max(version) FROM agent_runtime_schema").fetchone()
            version = int(found[0]) if found is not None and found[0] is not None else 0
        if version > SCHEMA_VERSION:
            raise MemoryStoreError(
                self.path,
                f"cannot be opened: its tables have schema version {version}; this "
                f"agent_runtime reads up to version {SCHEMA_VERSION}",
            )

    def _run(
        self, failed: str, call: Callable[[psycopg.Connection[Any]], T], *, read: bool = True
    ) -> T:
        """`call(conn)` on a pooled connection; psycopg's errors as `MemoryStoreError` whose
        cause starts with `failed`. A read on a reused connection that turns out broken is
        retried once on a new one."""
        deadline = time.monotonic() + self.timeout
        retried = False
        while True:
            try:
                conn, new = self._pool.acquire(deadline)
            except PoolClosed:
                raise ValueError(f"the memory store {self.path!r} is closed") from None
            except PoolTimeout:
                raise MemoryStoreError(
                    self.path,
                    f"{failed}: all {self._pool.size} connections of the store stayed in use "
                    f"for its timeout of {self.timeout:g} s",
                ) from None
            except self._pg.Error as exc:
                error = self._error(exc, f"{failed}: cannot connect to the server")
                raise error from self._safe(exc)
            try:
                return call(conn)
            except self._pg.Error as exc:
                if read and not new and conn.broken and not retried:
                    retried = True
                    log.info("memory.postgres.reconnecting", dsn=self.path, error=self._text(exc))
                    continue
                raise self._error(exc, failed) from self._safe(exc)
            finally:
                self._pool.release(conn)

    def _error(self, exc: Exception, failed: str) -> MemoryStoreError:
        """`exc` as a MemoryStoreError naming this store's DSN (no password), what failed and
        why (the driver's text, scrubbed of the password)."""
        return MemoryStoreError(self.path, f"{failed}: {_describe(exc, self)}")

    def _safe(self, exc: BaseException) -> BaseException | None:
        """`exc` if it may be chained as the cause of an error: its text holds no form of the
        password (else None: the error's message has the scrubbed text)."""
        text = " ".join(str(exc).split())
        return exc if self.dsn.redact(text) == text else None

    def _text(self, exc: BaseException) -> str:
        return self.dsn.redact(" ".join(str(exc).split()))

    def _check_state(self, session: str, key: str) -> None:
        _check_text(check_session(session), "session")
        _check_text(check_key(key), "session state key")


def _load(conn: psycopg.Connection[Any], session: str) -> SessionHistory:
    rows = conn.execute(LOAD, (session,)).fetchall()
    if not rows:
        return history([], 0, 0)
    return history(_decode(rows, 2), int(rows[0][0]), int(rows[0][1]))


def _changes(conn: psycopg.Connection[Any], session: str, since: int) -> SessionChanges:
    if since == 0:
        loaded = _load(conn, session)
        return changes(loaded.messages, loaded.sequence, replaced=True)
    rows = conn.execute(CHANGES, {"session": session, "since": since}).fetchall()
    sequence, base = (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)
    if since > sequence:  # the reader is ahead: its history is not this store's
        loaded = _load(conn, session)
        return changes(loaded.messages, loaded.sequence, replaced=True)
    # Every stored row was written at or after the last compaction or delete (`base`): for
    # a reader from before it, the rows after `since` are the whole history, as of the
    # same snapshot.
    return changes(_decode(rows, 2), sequence, replaced=is_replaced(since, sequence, base))


def _sequence(conn: psycopg.Connection[Any], session: str) -> int:
    row = conn.execute(
        "SELECT sequence FROM agent_runtime_sessions WHERE session = %s", (session,)
    ).fetchone()
    return 0 if row is None else int(row[0])


def _lock(conn: psycopg.Connection[Any], session: str) -> tuple[int, bool]:
    """Lock the session's row until the transaction ends; its (sequence, live), or
    (0, False) if it has none."""
    row = conn.execute(LOCK, (session,)).fetchone()
    return (0, False) if row is None else (int(row[0]), bool(row[1]))


def _decode(rows: list[Any], column: int) -> list[Message]:
    parts = [row[column] for row in rows if row[column] is not None]
    return MessageListAdapter.validate_json("[" + ",".join(parts) + "]")


def _check_text(value: str, what: str) -> str:
    if "\x00" in value:
        raise ValueError(f"invalid {what} {value!r} (PostgresStore cannot store a NUL character)")
    return value


def _ms(seconds: float) -> str:
    return f"{max(1, math.ceil(seconds * 1000))}ms"


# SQLSTATEs in words (the server's text stays in the message, in parentheses).
_CAUSES = {
    "55P03": "another connection held a lock past the store's timeout",
    "57014": "the server took longer than the store's statement_timeout",
    "28P01": "the server refused the password",
    "28000": "the server refused the credentials",
    "3D000": "the database does not exist",
    "42501": "the user lacks a privilege it needs",
    "53100": "the server's disk is full",
    "57P01": "the server was shut down or the connection terminated",
}


def _describe(exc: Exception, store: PostgresStore) -> str:
    text = store._text(exc)
    sqlstate = getattr(exc, "sqlstate", None)
    cause = _CAUSES.get(sqlstate or "")
    return f"{cause} ({text})" if cause else text


def _load_psycopg() -> ModuleType:
    try:
        import psycopg
    except ImportError as exc:
        raise ImportError(f"PostgresStore needs psycopg 3: {INSTALL_HINT}") from exc
    return psycopg
