"""InMemoryStore: session histories in a dict, for tests and for sessions that need not last."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import TracebackType

from agent_runtime._errors import ConcurrentModification
from agent_runtime.memory._models import SessionChanges, SessionHistory, changes, history
from agent_runtime.memory._size import message_bytes
from agent_runtime.memory._store import (
    check_key,
    check_messages,
    check_sequence,
    check_session,
    check_texts,
    is_replaced,
)
from agent_runtime.messages import Message


@dataclass
class _Session:
    messages: list[Message] = field(default_factory=list)
    # seqs[i]: the change that wrote messages[i]; non-decreasing, so `changes` bisects it.
    seqs: list[int] = field(default_factory=list)
    sequence: int = 0
    base: int = 0  # the last compaction or delete (0: none)
    size: int = 0
    live: bool = True


class InMemoryStore:
    """A `MemoryStore` in process memory: fast, lost when the process ends.

    Thread-safe: one lock guards the dicts and is held only for list and dict operations (no
    I/O, no callbacks). Messages are frozen models, so stored objects are shared with readers,
    but every `load` returns a fresh list. Same semantics as `SqliteStore` and `PostgresStore`
    (the contract tests run on all three).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}
        self._state: dict[str, dict[str, str]] = {}
        self._closed = False

    def load(self, session: str) -> SessionHistory:
        """See `MemoryStore.load`."""
        check_session(session)
        with self._lock:
            self._check_open()
            state = self._sessions.get(session)
            if state is None:
                return history([], 0, 0)
            return history(list(state.messages), state.sequence, state.size)

    def changes(self, session: str, since: int) -> SessionChanges:
        """See `MemoryStore.changes` (a bisection, then a copy of what was added)."""
        check_session(session)
        check_sequence(since, "since")
        with self._lock:
            self._check_open()
            state = self._sessions.get(session) or _Session()
            if is_replaced(since, state.sequence, state.base):
                return changes(list(state.messages), state.sequence, replaced=True)
            start = bisect.bisect_right(state.seqs, since)
            return changes(state.messages[start:], state.sequence, replaced=False)

    def append(self, session: str, messages: Iterable[Message]) -> int:
        """See `MemoryStore.append`."""
        check_session(session)
        batch = check_messages(messages)
        added = message_bytes(batch)
        with self._lock:
            self._check_open()
            state = self._sessions.get(session)
            if not batch:
                return 0 if state is None else state.sequence
            if state is None:
                state = self._sessions[session] = _Session()
            state.sequence += 1
            state.messages.extend(batch)
            state.seqs.extend([state.sequence] * len(batch))
            state.size += added
            state.live = True
            return state.sequence

    def replace(self, session: str, messages: Iterable[Message], expected_sequence: int) -> int:
        """See `MemoryStore.replace`."""
        check_session(session)
        batch = check_messages(messages)
        check_sequence(expected_sequence)
        size = message_bytes(batch)
        with self._lock:
            self._check_open()
            state = self._sessions.get(session, _Session())
            if state.sequence != expected_sequence:
                raise ConcurrentModification(session, expected_sequence, state.sequence)
            sequence = state.sequence + 1
            self._sessions[session] = _Session(
                batch, [sequence] * len(batch), sequence, base=sequence, size=size
            )
            return sequence

    def sessions(self) -> list[str]:
        """See `MemoryStore.sessions`."""
        with self._lock:
            self._check_open()
            return sorted(name for name, state in self._sessions.items() if state.live)

    def delete(self, session: str) -> int | None:
        """See `MemoryStore.delete`."""
        check_session(session)
        with self._lock:
            self._check_open()
            state = self._sessions.get(session)
            if state is None or not state.live:
                return None
            sequence = state.sequence + 1
            self._sessions[session] = _Session([], [], sequence, base=sequence, live=False)
            return sequence

    def state_get(self, session: str, key: str) -> str | None:
        """See `MemoryStore.state_get`."""
        check_session(session)
        check_key(key)
        with self._lock:
            self._check_open()
            return self._state.get(session, {}).get(key)

    def state_put(self, session: str, key: str, value: str) -> None:
        """See `MemoryStore.state_put`."""
        check_session(session)
        check_key(key)
        with self._lock:
            self._check_open()
            self._state.setdefault(session, {})[key] = value

    def state_delete(self, session: str, key: str) -> bool:
        """See `MemoryStore.state_delete`."""
        check_session(session)
        check_key(key)
        with self._lock:
            self._check_open()
            values = self._state.get(session)
            if values is None or key not in values:
                return False
            del values[key]
            if not values:
                del self._state[session]
            return True

    def state_compare_and_set(
        self, session: str, key: str, expected: str | None, value: str
    ) -> bool:
        """See `MemoryStore.state_compare_and_set`."""
        check_session(session)
        check_key(key)
        check_texts(expected, value)
        with self._lock:
            self._check_open()
            values = self._state.setdefault(session, {})
            if values.get(key) != expected:
                if not values:
                    del self._state[session]
                return False
            values[key] = value
            return True

    def state_items(self, session: str) -> dict[str, str]:
        """See `MemoryStore.state_items`."""
        check_session(session)
        with self._lock:
            self._check_open()
            return dict(self._state.get(session, {}))

    def close(self) -> None:
        """Drop every history and state; later calls raise `ValueError`. Idempotent."""
        with self._lock:
            self._closed = True
            self._sessions.clear()
            self._state.clear()

    def __enter__(self) -> InMemoryStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<InMemoryStore sessions={len(self._sessions)} closed={self._closed}>"

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("the memory store is closed")
