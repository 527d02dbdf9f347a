"""InMemoryStore: session histories in a dict, for tests and for sessions that need not last."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import TracebackType

from agent_runtime._errors import ConcurrentModification
from agent_runtime.memory._models import SessionHistory, history
from agent_runtime.memory._store import check_messages, check_sequence, check_session
from agent_runtime.messages import Message


@dataclass
class _Session:
    messages: list[Message] = field(default_factory=list)
    sequence: int = 0
    live: bool = True


class InMemoryStore:
    """A `MemoryStore` in process memory: fast, lost when the process ends.

    Thread-safe: one lock guards the dict and is held only for list operations (no I/O, no
    callbacks). Messages are frozen models, so stored objects are shared with readers, but
    every `load` returns a fresh list. Same semantics as `SqliteStore` (the contract tests run
    on both).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}
        self._closed = False

    def load(self, session: str) -> SessionHistory:
        """See `MemoryStore.load`."""
        check_session(session)
        with self._lock:
            self._check_open()
            state = self._sessions.get(session)
            if state is None:
                return history([], 0)
            return history(list(state.messages), state.sequence)

    def append(self, session: str, messages: Iterable[Message]) -> int:
        """See `MemoryStore.append`."""
        check_session(session)
        batch = check_messages(messages)
        with self._lock:
            self._check_open()
            state = self._sessions.get(session)
            if not batch:
                return 0 if state is None else state.sequence
            if state is None:
                state = self._sessions[session] = _Session()
            state.messages.extend(batch)
            state.sequence += 1
            state.live = True
            return state.sequence

    def replace(self, session: str, messages: Iterable[Message], expected_sequence: int) -> int:
        """See `MemoryStore.replace`."""
        check_session(session)
        batch = check_messages(messages)
        check_sequence(expected_sequence)
        with self._lock:
            self._check_open()
            state = self._sessions.get(session, _Session())
            if state.sequence != expected_sequence:
                raise ConcurrentModification(session, expected_sequence, state.sequence)
            self._sessions[session] = _Session(batch, state.sequence + 1, live=True)
            return state.sequence + 1

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
            self._sessions[session] = _Session([], state.sequence + 1, live=False)
            return state.sequence + 1

    def close(self) -> None:
        """Drop every history; later calls raise `ValueError`. Idempotent."""
        with self._lock:
            self._closed = True
            self._sessions.clear()

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
