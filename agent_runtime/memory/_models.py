"""The data of session memory: a session's history and the events that report its changes."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agent_runtime.messages import Message


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SessionHistory(_Frozen):
    """A session's messages, oldest first, and the sequence they were read at.

    `sequence` is the session's version: the number of changes committed to it. Every non-empty
    append, every compaction (`replace`) and every delete adds exactly one; nothing else changes
    it and it never decreases, even across a delete. A session never written has sequence 0 and
    no messages. Pass it back as `expected_sequence` to compact: the compaction is refused
    (`ConcurrentModification`) when any change was committed in between.

    `messages` is a fresh list on every read: changing it changes nothing stored.
    `bytes` is the history's size: the sum of the UTF-8 lengths of its messages' JSON
    (`message.model_dump_json()`), 0 where the reader did not count it.
    """

    messages: list[Message] = Field(default_factory=list)
    sequence: int = Field(default=0, ge=0)
    bytes: int = Field(default=0, ge=0)


class MemoryAdded(_Frozen):
    """`messages` were appended to `session`'s history by the change numbered `sequence`;
    `bytes` is the history's size after the change (as `SessionHistory.bytes`)."""

    type: Literal["memory_added"] = "memory_added"
    session: str
    messages: list[Message]
    sequence: int = Field(ge=1)
    bytes: int = Field(default=0, ge=0)


class MemoryCompacted(_Frozen):
    """`session`'s history was replaced by `messages` (a compaction; a delete reports `[]`) by
    the change numbered `sequence`; `bytes` is the history's size after it (as
    `SessionHistory.bytes`)."""

    type: Literal["memory_compacted"] = "memory_compacted"
    session: str
    messages: list[Message]
    sequence: int = Field(ge=1)
    bytes: int = Field(default=0, ge=0)


MemoryEvent = Annotated[MemoryAdded | MemoryCompacted, Field(discriminator="type")]
"""Any session-memory event, discriminated by `type`."""

MemoryEventAdapter: TypeAdapter[MemoryEvent] = TypeAdapter(MemoryEvent)
"""Validates / parses one `MemoryEvent` from Python data or JSON (`validate_json`)."""


class SessionChanges(_Frozen):
    """What a session's history gained after a sequence a reader saw (`MemoryStore.changes`).

    - `replaced=False`: every change after that sequence was an append; `messages` are exactly
      the messages those appends added, in commit order (empty when nothing changed).
      Appending them to the history the reader had at that sequence gives the history at
      `sequence`.
    - `replaced=True`: the reader's history is gone (a compaction or delete came after it, or
      the reader had nothing: it asked from 0, or from a sequence the store never reached);
      `messages` is the whole current history, to be taken instead of the reader's.

    `sequence` is the session's sequence the answer was read at: pass it as `since` next time.
    """

    messages: list[Message] = Field(default_factory=list)
    sequence: int = Field(default=0, ge=0)
    replaced: bool = False


def history(messages: list[Message], sequence: int, size: int = 0) -> SessionHistory:
    """A `SessionHistory` of values a store already validated (skips revalidating every message)."""
    return SessionHistory.model_construct(messages=messages, sequence=sequence, bytes=size)


def changes(messages: list[Message], sequence: int, *, replaced: bool) -> SessionChanges:
    """A `SessionChanges` of values a store already validated."""
    return SessionChanges.model_construct(messages=messages, sequence=sequence, replaced=replaced)
