"""AgentRegistry: the runtime's table of live agents keyed by `(session, role, index)`."""

from __future__ import annotations

import builtins
import threading
from typing import Any, Generic, TypeVar

import pykka

from agent_runtime._errors import AlreadyRegistered
from agent_runtime._key import AgentKey
from supervisors import Monitor, watch

__all__ = ["AgentKey", "AgentRegistry", "AlreadyRegistered"]

V = TypeVar("V")


class _Entry(Monitor, Generic[V]):
    """A registered value; with an actor `ref`, also the monitor of that actor's exit (one
    object per agent for the cyclic collector to walk, where an entry, its monitor and the
    monitor's callback were three)."""

    def __init__(
        self,
        value: V,
        metadata: dict[str, Any],
        ref: pykka.ActorRef[Any] | None,
        key: AgentKey,
        table: AgentRegistry[V],
    ) -> None:
        super().__init__(None)
        self.value = value
        self.metadata = metadata
        self.ref = ref
        self.key = key
        self.table = table

    def __repr__(self) -> str:
        return f"_Entry(key={self.key!r}, value={self.value!r}, ref={self.ref!r})"

    def live(self) -> bool:
        return self.ref is None or self.ref.is_alive()

    def exited(self, _ref: pykka.ActorRef[Any], _reason: object) -> None:
        """Its actor exited: the entry goes, unless it was replaced."""
        self.table._drop(self.key, self)


class AgentRegistry(Generic[V]):
    """A thread-safe table of agents (or any values) under unique `AgentKey`s.

    Guarantees:
    - Keys are unique: registering a key that a live entry holds raises `AlreadyRegistered`
      carrying the holder; under a race exactly one registration wins.
    - An entry registered with an actor `ref` disappears when that actor exits, however it
      exits (normal stop, crash, kill), without anyone calling `unregister`.
    - Listings are snapshots sorted by key; no lock is held while user code runs.

    Every method validates its key: a bad key (empty session or role, negative index, wrong
    types) raises `ValueError` naming the bad part.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[AgentKey, _Entry[V]] = {}

    def register(
        self,
        key: AgentKey | tuple[str, str, int],
        value: V,
        *,
        ref: pykka.ActorRef[Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> AgentKey:
        """Register `value` under `key`, removed automatically when actor `ref` exits.

        Raises:
            AlreadyRegistered: a live entry holds the key (`.holder` is its value).
            ValueError: the key is invalid.
        """
        agent_key = AgentKey.of(key)
        entry = _Entry(value, dict(metadata or {}), ref, agent_key, self)
        with self._lock:
            current = self._entries.get(agent_key)
            if current is not None and current.live():
                raise AlreadyRegistered(agent_key, current.value)
            self._entries[agent_key] = entry
        if current is not None:
            current.cancel()
        if ref is not None:
            # Registered before the monitor, so an actor that is already dead is removed at once.
            watch(ref, entry)
        return agent_key

    def _drop(self, key: AgentKey, entry: _Entry[V]) -> None:
        with self._lock:
            if self._entries.get(key) is entry:
                del self._entries[key]

    def unregister(self, key: AgentKey | tuple[str, str, int]) -> bool:
        """Remove the entry under `key`; False if there was none."""
        agent_key = AgentKey.of(key)
        with self._lock:
            entry = self._entries.pop(agent_key, None)
        if entry is not None:
            entry.cancel()
        return entry is not None

    def _live(self, key: AgentKey) -> _Entry[V] | None:
        entry = self._entries.get(key)
        return entry if entry is not None and entry.live() else None

    def lookup(self, key: AgentKey | tuple[str, str, int]) -> V | None:
        """The value under `key`, or None."""
        agent_key = AgentKey.of(key)
        with self._lock:
            entry = self._live(agent_key)
        return None if entry is None else entry.value

    def lookup_with_metadata(
        self, key: AgentKey | tuple[str, str, int]
    ) -> tuple[V, dict[str, Any]] | None:
        """`(value, metadata)` under `key` (metadata is a copy), or None."""
        agent_key = AgentKey.of(key)
        with self._lock:
            entry = self._live(agent_key)
            if entry is None:
                return None
            return entry.value, dict(entry.metadata)

    def update_metadata(self, key: AgentKey | tuple[str, str, int], **changes: Any) -> bool:
        """Merge `changes` into the metadata under `key`; False if no entry."""
        agent_key = AgentKey.of(key)
        with self._lock:
            entry = self._live(agent_key)
            if entry is None:
                return False
            entry.metadata.update(changes)
            return True

    def _snapshot(self) -> list[tuple[AgentKey, V]]:
        with self._lock:
            items = [(k, e.value) for k, e in self._entries.items() if e.live()]
        return sorted(items, key=lambda item: item[0])

    def list(self) -> list[tuple[AgentKey, V]]:
        """Every `(key, value)`, sorted by key."""
        return self._snapshot()

    def list_by_session(self, session: str) -> builtins.list[tuple[str, int, V]]:
        """`(role, index, value)` of every entry of `session`, sorted."""
        _check_text("session", session)
        return [(k.role, k.index, v) for k, v in self._snapshot() if k.session == session]

    def list_by_role(self, role: str) -> builtins.list[tuple[str, int, V]]:
        """`(session, index, value)` of every entry with `role`, sorted."""
        _check_text("role", role)
        return [(k.session, k.index, v) for k, v in self._snapshot() if k.role == role]

    def count(self) -> int:
        """How many live entries there are."""
        with self._lock:
            return sum(1 for e in self._entries.values() if e.live())

    def count_by_session(self, session: str) -> int:
        """How many live entries `session` has."""
        return len(self.list_by_session(session))

    def next_index(self, session: str, role: str) -> int:
        """The smallest index not held by a live entry of `(session, role)`.

        Two callers may get the same answer; the registration decides who wins, so callers
        that race retry on `AlreadyRegistered`.
        """
        _check_text("session", session)
        _check_text("role", role)
        with self._lock:
            taken = {
                k.index
                for k, e in self._entries.items()
                if k.session == session and k.role == role and e.live()
            }
        index = 0
        while index in taken:
            index += 1
        return index


def _check_text(name: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"invalid {name} {value!r} (expected a non-empty str)")
