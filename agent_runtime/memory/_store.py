"""The store port of session memory (`MemoryStore`) and the argument checks every store shares."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from agent_runtime.memory._models import SessionHistory
from agent_runtime.messages import AssistantMessage, Message, ToolResultMessage, UserMessage

_MESSAGE_TYPES = (UserMessage, AssistantMessage, ToolResultMessage)


@runtime_checkable
class MemoryStore(Protocol):
    """Where session histories live. Implementations: `SqliteStore` (durable), `InMemoryStore`.

    Every method is thread-safe and atomic: a change is stored whole or not at all, and a read
    sees a history as of one committed change. A session's `sequence` counts its committed
    changes (see `SessionHistory`). After `close()`, every method but `close` raises
    `ValueError`. A store that fails to carry out a call (its database is locked, the disk is
    full) raises `MemoryStoreError` naming its file and the cause; nothing is changed then.
    """

    def load(self, session: str) -> SessionHistory:
        """The session's messages and sequence (empty, sequence 0, for an unknown session).

        Raises:
            TypeError, ValueError: `session` is not a non-empty str.
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


def check_sequence(expected_sequence: Any) -> int:
    """`expected_sequence` if it is an int >= 0.

    Raises:
        TypeError: it is not an int (a bool is not).
        ValueError: it is negative.
    """
    if isinstance(expected_sequence, bool) or not isinstance(expected_sequence, int):
        raise TypeError(f"invalid expected_sequence {expected_sequence!r} (expected an int >= 0)")
    if expected_sequence < 0:
        raise ValueError(f"invalid expected_sequence {expected_sequence!r} (expected an int >= 0)")
    return expected_sequence
