"""SessionMemory: the session histories shared by agents, over a store, with change events."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING

from agent_runtime._errors import ConcurrentModification
from agent_runtime.abort import AbortSignal
from agent_runtime.llm._port import ChatModel
from agent_runtime.memory._auto_compaction import AutoCompaction
from agent_runtime.memory._compaction import (
    DEFAULT_ATTEMPTS,
    DEFAULT_KEEP_LAST,
    CompactionResult,
    check_count,
    compact_history,
)
from agent_runtime.memory._in_memory import InMemoryStore
from agent_runtime.memory._models import MemoryAdded, MemoryCompacted, MemoryEvent, SessionHistory
from agent_runtime.memory._size import message_bytes
from agent_runtime.memory._sqlite import SqliteStore
from agent_runtime.memory._state import SessionState
from agent_runtime.memory._store import MemoryStore, check_messages, check_session
from agent_runtime.memory._subscription import MemorySubscription
from agent_runtime.messages import Message
from agent_runtime.telemetry import meter
from supervisors._log import get_logger

if TYPE_CHECKING:
    from agent_runtime.config import MemoryConfig
    from agent_runtime.memory._models import SessionChanges

log = get_logger(__name__)

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

    Sizes: the `bytes` of `MemoryAdded` and `MemoryCompacted` is the history's size after the
    change (see `SessionHistory.bytes`), kept as a running total per session that the first
    change through this object starts with one read of the session (changes made by another
    process are not counted). `auto_compact` compacts a session with a model once an append
    takes it past a size; `compact_with` does it on demand.
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
        self._sizes: dict[str, int] = {}  # per session: its history's bytes, as last changed here
        self._auto_lock = threading.Lock()
        self.auto_compaction: AutoCompaction | None = None
        """The compaction trigger `auto_compact` started, else None."""

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
        added = message_bytes(batch)
        with self._lock(session):
            try:
                size = self._size_before_change(session) + added
                sequence = self.store.append(session, batch)
            except Exception as exc:
                APPEND_FAILURES.add(1, {"error.type": type(exc).__name__})
                raise
            self._sizes[session] = size
            self._publish(
                MemoryAdded(session=session, messages=batch, sequence=sequence, bytes=size)
            )
        log.debug("memory.appended", session=session, count=len(batch), sequence=sequence)
        auto = self.auto_compaction
        if auto is not None:
            auto.added(session, size)  # queues at most: never waits for the compaction
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
        size = message_bytes(batch)
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
            self._sizes[session] = size
            self._publish(
                MemoryCompacted(session=session, messages=batch, sequence=sequence, bytes=size)
            )
        log.debug("memory.compacted", session=session, count=len(batch), sequence=sequence)
        return sequence

    def compact_with(
        self,
        model: ChatModel,
        session: str,
        *,
        keep_last: int = DEFAULT_KEEP_LAST,
        attempts: int = DEFAULT_ATTEMPTS,
        signal: AbortSignal | None = None,
        timeout: float | None = None,
    ) -> CompactionResult:
        """Summarise the session's older history with `model` and compact it: the history
        becomes one user and one assistant message holding the summary (asked of the model
        as structured output, a `CompactionSummary`), followed by the newest `keep_last`
        messages verbatim.

        Guarantees:
        - the kept tail starts at a tool-call unit's boundary: it holds more than `keep_last`
          messages when the cut would separate a tool call from its results (see
          `split_point`); tool calls of the summarised part become text in the summary, so
          no call or result is left without its partner;
        - nothing committed after this call read the history is lost: the compaction commits
          with the sequence it read (`compact`), and when the history moved on meanwhile it
          reads again. If the summarised messages are still the history's first ones (other
          writers only appended), the summary is reused and the new messages join the kept
          tail without asking the model again; otherwise the model is asked again. After
          `attempts` reads that all lost the race it raises;
        - a history with nothing to summarise (at most `keep_last` messages, or one unit) is
          left alone and the model is not called (`result.compacted` is False).
        Blocks the calling thread for the model call (on the LLM layer's sync bridge loop):
        call it from a thread of its own, never on an event loop. `signal` aborts the model
        call, `timeout` bounds each one.

        Raises:
            ConcurrentModification: the history moved on before each of the `attempts`
                commits (its note names the session and the attempts); nothing is changed.
            StructuredOutputError: the model's answer was not a valid summary.
            LLMError, Aborted, TimeoutError: the model call failed, was aborted, timed out.
            TypeError, ValueError: `model` is not a ChatModel, a bad `session`, `keep_last`
                (an int >= 0) or `attempts` (an int >= 1), or the store is closed.
            RuntimeError: called on a thread that runs an event loop.
            MemoryStoreError: the store failed a read or the commit.
        """
        return compact_history(
            self,
            model,
            session,
            keep_last=keep_last,
            attempts=attempts,
            signal=signal,
            timeout=timeout,
        )

    def auto_compact(
        self, model: ChatModel, *, above_bytes: int, keep_last: int = DEFAULT_KEEP_LAST
    ) -> AutoCompaction:
        """Compact every session with `model` (as `compact_with(model, session,
        keep_last=keep_last)`) once an append through this object takes its history past
        `above_bytes` bytes (`MemoryAdded.bytes`); return the trigger (see `AutoCompaction`
        for its guarantees). `close()` stops it. The runtime starts it from the config keys
        `memory.compact_above_bytes` and `memory.compaction_profile`.

        Raises:
            TypeError, ValueError: `model` is not a ChatModel, `above_bytes` is not an
                int >= 1 or `keep_last` not an int >= 0.
            RuntimeError: a trigger is already started.
        """
        if not isinstance(model, ChatModel):
            raise TypeError(f"invalid model {model!r} (expected a ChatModel)")
        check_count("keep_last", keep_last, minimum=0)

        def compact(session: str, signal: AbortSignal) -> CompactionResult:
            return self.compact_with(model, session, keep_last=keep_last, signal=signal)

        with self._auto_lock:
            if self.auto_compaction is not None:
                raise RuntimeError(f"{self!r} already compacts automatically")
            self.auto_compaction = AutoCompaction(compact, above_bytes=above_bytes)
            return self.auto_compaction

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
                self._sizes[session] = 0
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
        """Stop the compaction trigger (aborting a compaction in flight), close every
        subscription (readers stop after their queued events) and the store. Idempotent."""
        with self._auto_lock:
            auto = self.auto_compaction
        if auto is not None:
            auto.close()
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

    def _size_before_change(self, session: str) -> int:
        """The session's history size before a change (under the session's lock): the running
        total, or one read of the history on the first change through this object (the
        store's own count when it keeps one)."""
        size = self._sizes.get(session)
        if size is None:
            history = self.store.load(session)
            size = history.bytes or message_bytes(history.messages)
        return size

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
