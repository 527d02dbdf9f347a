"""SessionMemory: the session histories shared by agents, over a store, with change events."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING

import structlog

from agent_runtime._errors import ConcurrentModification
from agent_runtime.memory._in_memory import InMemoryStore
from agent_runtime.memory._models import MemoryAdded, MemoryCompacted, MemoryEvent, SessionHistory
from agent_runtime.memory._sqlite import SqliteStore
from agent_runtime.memory._state import SessionState
from agent_runtime.memory._store import MemoryStore, check_messages, check_session
from agent_runtime.memory._subscription import MemorySubscription
from agent_runtime.messages import Message
from agent_runtime.telemetry import meter

if TYPE_CHECKING:
    from agent_runtime.config import MemoryConfig
    from agent_runtime.memory._models import SessionChanges

log = structlog.get_logger(__name__)

# A no-op until the application installs an OpenTelemetry SDK.
APPEND_FAILURES = meter().create_counter(
    "agent_runtime.memory.append_failures",
    unit="{batch}",
    description="Appends to session memory that failed (nothing of the batch was stored)",
)


class SessionMemory:
    """Session histories shared by every agent of a session (DESIGN.md 9), over a `MemoryStore`.

    `SessionMemory(store)` takes the store it is given (and owns it: `close()` closes it);
    `SessionMemory.default(path)` opens the default, durable `SqliteStore` at `path`;
    `SessionMemory(InMemoryStore())` is for tests.

    Guarantees:
    - thread-safe; a change returns only once the store committed it (see the store for what
      survives a crash);
    - `subscribe(session)` delivers a `MemoryAdded` / `MemoryCompacted` event for every change
      made through this object after the subscription, in `sequence` order. Changes made by
      another process or another `SessionMemory` on the same file are stored but not reported;
    - changes to one session through this object are serialised by that session's own lock
      (made on first use, gone when no change holds it) held across the store call and the
      queueing of its event, so events are queued in commit order; sessions never wait for
      each other here (a store that serialises its connection may still make them).
      Queueing never waits and never runs user code; readers read from their own queues,
      outside every lock.
    `last_n` windows of a `MemoryPolicy` are applied by readers with `window`.
    """

    def __init__(self, store: MemoryStore) -> None:
        if not isinstance(store, MemoryStore):
            raise TypeError(f"invalid store {store!r} (expected a MemoryStore)")
        self.store = store
        self._locks_lock = threading.Lock()
        self._session_locks: weakref.WeakValueDictionary[str, _SessionLock] = (
            weakref.WeakValueDictionary()
        )
        self._subs_lock = threading.Lock()
        self._subs: dict[str, weakref.WeakSet[MemorySubscription]] = {}

    @classmethod
    def default(cls, path: str | os.PathLike[str]) -> SessionMemory:
        """Session memory in the durable `SqliteStore` at `path` (created if missing).

        Raises:
            ValueError, MemoryStoreError: as `SqliteStore`.
        """
        return cls(SqliteStore(path))

    @classmethod
    def from_config(cls, config: MemoryConfig) -> SessionMemory:
        """Session memory as `config` (`RuntimeConfig.memory`) says: a `SqliteStore` at
        `config.path`, an `InMemoryStore` when `config.store == "memory"`, or a
        `PostgresStore` at `config.dsn` when `config.store == "postgres"`.

        Raises:
            ValueError, MemoryStoreError: as the store's constructor (a "postgres" store
                without a `dsn` is a ValueError).
            ImportError: a "postgres" store without psycopg installed.
        """
        if config.store == "memory":
            return cls(InMemoryStore())
        if config.store == "postgres":
            from agent_runtime.memory._postgres import PostgresStore  # an optional extra

            if config.dsn is None:
                raise ValueError('memory.store = "postgres" needs memory.dsn (none is set)')
            return cls(PostgresStore(config.dsn.get_secret_value()))
        return cls.default(config.path)

    def history(self, session: str) -> SessionHistory:
        """The session's messages and sequence (empty, sequence 0, for an unknown session).

        Raises:
            TypeError, ValueError: `session` is not a non-empty str, or the store is closed.
        """
        return self.store.load(session)

    def changes(self, session: str, since: int) -> SessionChanges:
        """What the session gained after sequence `since`: the messages appended since, or the
        whole history when a compaction or delete came after `since` (`replaced=True`; also
        for `since` 0 or ahead of the store). See `SessionChanges`.

        To follow a session: keep the `sequence` of each answer and pass it as the next
        `since`. The cost of an answer that is not `replaced` grows with what was appended
        after `since`, never with the history before it.

        Raises:
            TypeError, ValueError: a bad `session` or `since` (an int >= 0), or the store is
                closed.
            MemoryStoreError: the store could not read.
        """
        return self.store.changes(session, since)

    def kv(self, session: str) -> SessionState:
        """The session's key-value state (`put`, `get`, `delete`, `items` of JSON values),
        durable in this memory's store beside the history and shared by every agent of the
        session (and every process on the same store). See `SessionState`.

        Raises:
            TypeError, ValueError: `session` is not a non-empty str.
        """
        return SessionState(self.store, session)

    def append(self, session: str, messages: Iterable[Message]) -> int:
        """Append `messages` to the session's history as one atomic batch; return the new
        sequence. An empty batch changes nothing, reports nothing and returns the current
        sequence. A batch the store fails to append (nothing of it is stored) is counted by
        the `agent_runtime.memory.append_failures` metric, by `error.type`.

        Raises:
            TypeError, ValueError: a bad `session` or an item that is not a `Message` (nothing
                is stored), or the store is closed.
            MemoryStoreError: the store could not append (a locked database, a full disk).
        """
        check_session(session)
        batch = check_messages(messages)
        if not batch:
            return self.store.append(session, batch)
        with self._lock(session):
            try:
                sequence = self.store.append(session, batch)
            except Exception as exc:
                APPEND_FAILURES.add(1, {"error.type": type(exc).__name__})
                raise
            self._publish(MemoryAdded(session=session, messages=batch, sequence=sequence))
        log.debug("memory.appended", session=session, count=len(batch), sequence=sequence)
        return sequence

    def compact(self, session: str, replacement: Iterable[Message], expected_sequence: int) -> int:
        """Replace the session's history by `replacement` (e.g. a summary and the newest
        messages) if it is still at `expected_sequence`; return the new sequence.

        Read with `history()`, build the replacement, compact with the sequence you read: a
        change committed in between makes the compaction fail rather than lose that change.

        Raises:
            ConcurrentModification: the history moved on (nothing is changed); read it again
                and retry.
            TypeError, ValueError: a bad `session`, `replacement` or `expected_sequence`, or
                the store is closed.
        """
        check_session(session)
        batch = check_messages(replacement)
        with self._lock(session):
            try:
                sequence = self.store.replace(session, batch, expected_sequence)
            except ConcurrentModification as exc:
                log.info(
                    "memory.compact.refused",
                    session=session,
                    expected=exc.expected,
                    actual=exc.actual,
                )
                raise
            self._publish(MemoryCompacted(session=session, messages=batch, sequence=sequence))
        log.debug("memory.compacted", session=session, count=len(batch), sequence=sequence)
        return sequence

    def sessions(self) -> list[str]:
        """The sessions that hold a history, sorted.

        Raises:
            ValueError: the store is closed.
        """
        return self.store.sessions()

    def delete(self, session: str) -> int | None:
        """Forget the session's history and return its new sequence; subscribers get a
        `MemoryCompacted` with no messages. For a session not in `sessions()`, change nothing,
        report nothing and return None.

        Raises:
            TypeError, ValueError: `session` is not a non-empty str, or the store is closed.
        """
        check_session(session)
        with self._lock(session):
            sequence = self.store.delete(session)
            if sequence is not None:
                self._publish(MemoryCompacted(session=session, messages=[], sequence=sequence))
        if sequence is not None:
            log.debug("memory.deleted", session=session, sequence=sequence)
        return sequence

    def subscribe(self, session: str, *, max_queue: int = 1000) -> MemorySubscription:
        """A subscription to the session's changes from now on (see `MemorySubscription`).

        To mirror a history: subscribe, then read `history()`, then apply only the events
        whose `sequence` is above the history's (the history may already hold the first).

        Raises:
            TypeError, ValueError: `session` is not a non-empty str, or `max_queue` < 1.
        """
        check_session(session)
        sub = MemorySubscription(session, max_queue=max_queue, on_close=self._unsubscribe)
        # Under the session's lock: a change is reported to a new subscriber whole or not at all.
        with self._lock(session), self._subs_lock:
            self._subs.setdefault(session, weakref.WeakSet()).add(sub)
        return sub

    def close(self) -> None:
        """Close every subscription (readers stop after their queued events) and the store.
        Idempotent."""
        with self._subs_lock:
            subs = [sub for group in self._subs.values() for sub in group]
            self._subs.clear()
        for sub in subs:
            sub.close()
        self.store.close()

    def __enter__(self) -> SessionMemory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<SessionMemory store={self.store!r}>"

    # -----------------------------------------------------------------------------------------

    def _lock(self, session: str) -> _SessionLock:
        with self._locks_lock:
            lock = self._session_locks.get(session)
            if lock is None:
                lock = self._session_locks[session] = _SessionLock()
            return lock

    def _publish(self, event: MemoryEvent) -> None:
        """Queue `event` for the session's subscribers (never waits); forget closed ones."""
        with self._subs_lock:
            group = self._subs.get(event.session)
            if group is None:
                return
            subs = list(group)
            if not subs:  # every subscriber was dropped without closing
                del self._subs[event.session]
                return
        for sub in subs:
            if not sub.offer(event):
                self._unsubscribe(sub)

    def _unsubscribe(self, sub: MemorySubscription) -> None:
        with self._subs_lock:
            group = self._subs.get(sub.session)
            if group is not None:
                group.discard(sub)
                if not group:
                    del self._subs[sub.session]


class _SessionLock:
    """One session's lock (weakly held by SessionMemory: it lives while a change holds it)."""

    __slots__ = ("__weakref__", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
