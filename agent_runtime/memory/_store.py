"""The store port of session memory (`MemoryStore`) and the argument checks every store shares."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from agent_runtime.memory._models import SessionChanges, SessionHistory
from agent_runtime.messages import AssistantMessage, Message, ToolResultMessage, UserMessage

_MESSAGE_TYPES = (UserMessage, AssistantMessage, ToolResultMessage)


@runtime_checkable
class MemoryStore(Protocol):
    """Where session histories live. Implementations: `SqliteStore` (durable, one file),
    `PostgresStore` (a server shared by several processes), `InMemoryStore`.

    Every method is thread-safe and atomic: a change is stored whole or not at all, and a read
    sees a history as of one committed change. A session's `sequence` counts its committed
    changes (see `SessionHistory`); its `bytes` (the size of its messages' JSON, as
    `message_bytes` counts it) is kept by each change (an append adds its batch's size), never
    recomputed over the history, and read back by `load`. Beside its history, each session holds
    key-value state (`state_*`, JSON text per key; see `SessionState`), untouched by changes
    of the history (a delete included). After `close()`, every method but `close` raises
    `ValueError`. A store that fails to carry out a call (its database is locked, the disk is
    full, the server is gone) raises `MemoryStoreError` naming the store (its file, or its
    DSN without the password) and the cause; nothing is changed then.
    """

    def load(self, session: str) -> SessionHistory:
        """The session's messages and sequence (empty, sequence 0, for an unknown session).

        Raises:
            TypeError, ValueError: `session` is not a non-empty str.
        """
        ...

    def changes(self, session: str, since: int) -> SessionChanges:
        """What the session gained after sequence `since` (see `SessionChanges`), read as of
        one committed change.

        When only appends came after `since`, the cost is that of reading the messages they
        added: it does not grow with the history committed up to `since`.

        Raises:
            TypeError, ValueError: `session` is not a non-empty str, or `since` is not an
                int >= 0.
        """
        ...

    def append(self, session: str, messages: Iterable[Message]) -> int:
        """Append `messages` in order, atomically, and return the session's new sequence.

        An empty batch changes nothing and returns the current sequence.

        Raises:
            TypeError, ValueError: `session` is not a non-empty str, or an item of `messages`
                is not a `Message` (nothing is stored then).
        """
        ...

    def replace(self, session: str, messages: Iterable[Message], expected_sequence: int) -> int:
        """Replace the whole history with `messages` if the stored sequence is
        `expected_sequence`; return the new sequence (`expected_sequence + 1`).

        Raises:
            ConcurrentModification: the stored sequence differs (nothing is changed).
            TypeError, ValueError: a bad `session`, `messages` or `expected_sequence`.
        """
        ...

    def sessions(self) -> list[str]:
        """The sessions that hold a history (written and not deleted since), sorted."""
        ...

    def delete(self, session: str) -> int | None:
        """Forget the session's messages and return its new sequence; for a session not in
        `sessions()`, change nothing and return None.

        The sequence is kept (and bumped) so a compaction based on a read from before the
        delete is refused; a later append starts a new history at the next sequence.

        Raises:
            TypeError, ValueError: `session` is not a non-empty str.
        """
        ...

    def state_get(self, session: str, key: str) -> str | None:
        """The JSON text stored under `key` in the session's state, or None."""
        ...

    def state_put(self, session: str, key: str, value: str) -> None:
        """Store the JSON text `value` under `key` in the session's state (replacing any)."""
        ...

    def state_delete(self, session: str, key: str) -> bool:
        """Remove `key` from the session's state; False if it was not there."""
        ...

    def state_compare_and_set(
        self, session: str, key: str, expected: str | None, value: str
    ) -> bool:
        """Store the JSON text `value` under `key` only if the text stored there now is exactly
        `expected` (None: the key is absent); True if it was stored. Atomic against every
        other writer of the key, in this process or another (one transaction, or one
        statement): of two calls with the same `expected`, at most one succeeds. When it
        returns False nothing was changed.

        Raises:
            TypeError, ValueError: a bad `session` or `key`, or `expected` / `value` is not a
                str (`expected` may be None).
        """
        ...

    def state_items(self, session: str) -> dict[str, str]:
        """Every key of the session's state with its JSON text, as of one committed change."""
        ...

    def close(self) -> None:
        """Release the store's resources; idempotent."""
        ...


def check_session(session: Any) -> str:
    """`session` if it is a non-empty str.

    Raises:
        TypeError: it is not a str.
        ValueError: it is empty.
    """
    if not isinstance(session, str):
        raise TypeError(f"invalid session {session!r} (expected a non-empty str)")
    if not session:
        raise ValueError("invalid session '' (expected a non-empty str)")
    return session


def check_messages(messages: Any) -> list[Message]:
    """`messages` as a new list, when it is an iterable of `Message` models.

    Raises:
        TypeError: it is a str, bytes, a mapping or not iterable, or an item is not a `Message`.
    """
    if isinstance(messages, str | bytes | dict) or not isinstance(messages, Iterable):
        raise TypeError(f"invalid messages {messages!r} (expected a list of Message)")
    checked = list(messages)
    for index, message in enumerate(checked):
        if not isinstance(message, _MESSAGE_TYPES):
            raise TypeError(
                f"invalid messages[{index}] {message!r} (expected a UserMessage, "
                "AssistantMessage or ToolResultMessage)"
            )
    return checked


def check_sequence(expected_sequence: Any, name: str = "expected_sequence") -> int:
    """`expected_sequence` if it is an int >= 0 (`name` is the argument's name in errors).

    Raises:
        TypeError: it is not an int (a bool is not).
        ValueError: it is negative.
    """
    if isinstance(expected_sequence, bool) or not isinstance(expected_sequence, int):
        raise TypeError(f"invalid {name} {expected_sequence!r} (expected an int >= 0)")
    if expected_sequence < 0:
        raise ValueError(f"invalid {name} {expected_sequence!r} (expected an int >= 0)")
    return expected_sequence


def check_key(key: Any) -> str:
    """`key` if it is a non-empty str (a key of a session's state).

    Raises:
        TypeError: it is not a str.
        ValueError: it is empty.
    """
    if not isinstance(key, str):
        raise TypeError(f"invalid session state key {key!r} (expected a non-empty str)")
    if not key:
        raise ValueError("invalid session state key '' (expected a non-empty str)")
    return key


def check_texts(expected: Any, value: Any) -> None:
    """Check the arguments of `state_compare_and_set`: `expected` a str or None, `value` a str.

    Raises:
        TypeError: either is not.
    """
    if expected is not None and not isinstance(expected, str):
        raise TypeError(f"invalid expected {expected!r} (expected the stored JSON text or None)")
    if not isinstance(value, str):
        raise TypeError(f"invalid value {value!r} (expected JSON text, a str)")


def is_replaced(since: int, sequence: int, base: int) -> bool:
    """Whether a reader at `since` must take the whole history of a session now at `sequence`
    whose last compaction or delete was change `base` (0: none): it had nothing (`since` 0),
    a history the store never had (`since` ahead), or one a later compaction or delete
    replaced (`since` before `base`)."""
    return since == 0 or since > sequence or since < base
