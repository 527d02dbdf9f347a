"""SessionState: a session's key-value state of JSON values, kept in its memory store."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from agent_runtime.memory._store import check_key, check_session

if TYPE_CHECKING:
    from agent_runtime.memory._store import MemoryStore

_MISSING: Any = object()


class SessionState:
    """The key-value state of one session (Oxyjen's Memory): `SessionMemory.kv(session)`,
    and `ctx.session_state` in a tool.

    Values are JSON: None, bool, int, finite float, str, and lists and dicts (with str keys)
    of those. Each is stored as its JSON text, so `get` and `items` return fresh copies equal
    to what was put (changing one changes nothing stored) and state survives whatever the
    store survives (`SqliteStore`: a crash of the process, like the history).

    Guarantees:
    - shared: every `SessionState` of the same session over the same store (each agent of
      the session has its own object) reads and writes the same keys; with `SqliteStore` and
      `PostgresStore`, so do other processes on the same file or database;
    - thread-safe and atomic per call: a `put` is seen whole or not at all, and the last
      committed `put` of a key wins; `items()` is a snapshot as of one committed change;
    - independent of the history: appends, compactions and `delete` of the session leave
      its state as it is;
    - no read-modify-write across calls: two agents that `get`, change and `put` the same key
      may overwrite each other (keep one writer per key, or one key per writer).

    Raises (every method):
        TypeError, ValueError: a bad key (not a non-empty str), or the store is closed.
        MemoryStoreError: the store failed to read or write.
    """

    __slots__ = ("session", "store")

    def __init__(self, store: MemoryStore, session: str) -> None:
        self.store = store
        self.session = check_session(session)

    def put(self, key: str, value: Any) -> None:
        """Store `value` under `key`, replacing what was there.

        Raises:
            TypeError: `value` is not JSON (the message names the key and what is not JSON:
                a set, a tuple, bytes, an object, a dict key that is not a str, NaN or an
                infinity); nothing is stored then.
        """
        check_key(key)
        self.store.state_put(self.session, key, encode(key, value))

    def get(self, key: str, default: Any = None) -> Any:
        """The value stored under `key` (a fresh copy), or `default` when there is none."""
        text = self.store.state_get(self.session, check_key(key))
        return default if text is None else json.loads(text)

    def delete(self, key: str) -> bool:
        """Remove `key`; True if it was there."""
        return self.store.state_delete(self.session, check_key(key))

    def items(self) -> dict[str, Any]:
        """Every key with its value (fresh copies), sorted by key."""
        stored = self.store.state_items(self.session)
        return {key: json.loads(stored[key]) for key in sorted(stored)}

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and bool(key) and self.get(key, _MISSING) is not _MISSING

    def __repr__(self) -> str:
        return f"<SessionState session={self.session!r} store={self.store!r}>"


def encode(key: str, value: Any) -> str:
    """`value` as JSON text, if it is a JSON value (see `SessionState`).

    Raises:
        TypeError: it is not; the message names `key` and where in `value` the problem is.
    """
    try:
        problem = _not_json(value, "")
    except RecursionError:
        problem = "it contains itself, or is nested too deeply"
    if problem is not None:
        raise TypeError(f"session state key {key!r}: the value is not JSON ({problem})")
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _not_json(value: Any, at: str) -> str | None:
    """What makes `value` (found at path `at` of the whole value) not JSON, or None."""
    where = f" at {at}" if at else ""
    if value is None or isinstance(value, bool | int | str):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value!r}{where} is not a finite number"
    if isinstance(value, list):
        for index, item in enumerate(value):
            problem = _not_json(item, f"{at}[{index}]")
            if problem is not None:
                return problem
        return None
    if isinstance(value, dict):
        for name, item in value.items():
            if not isinstance(name, str):
                return f"the dict key {name!r}{where} is a {type(name).__name__}, not a str"
            problem = _not_json(item, f"{at}[{name!r}]")
            if problem is not None:
                return problem
        return None
    return f"a {type(value).__name__}{where}, expected null, bool, number, str, list or dict"
