"""What an agent's history holds of its session's stored history, and merging in what the
session's other agents committed since (at each run's start, on the actor's thread)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Protocol

from agent_runtime.loop._approval import replace_amended
from agent_runtime.memory import MemoryPolicy, window
from agent_runtime.messages import Message


class Changes(Protocol):
    """What `SessionMemory.changes(session, since)` returns."""

    @property
    def messages(self) -> list[Message]: ...

    @property
    def sequence(self) -> int: ...

    @property
    def replaced(self) -> bool: ...


class SessionMirror:
    """The agent's view of its session: the stored sequence its history reflects, and its own
    committed messages not yet seen in the store (its writes go through the session writer,
    so they land later, in the agent's own order).

    Guarantee of `merge`: the history it returns is the session's stored history in commit
    order (within the policy's window), followed by the agent's own messages not stored yet
    (for a policy that does not write: the agent's history, then what the others committed
    since, its own messages kept across a compaction);
    when nothing but the agent's own messages was committed since, the history stays as it is
    and nothing is rebuilt, so a run's start costs one read of what changed, whatever the
    history's length.
    """

    def __init__(self, sequence: int) -> None:
        self.sequence = sequence
        self.own_pending: deque[Message] = deque()
        # Ids of the own messages not handed to the writer yet (a crashed incarnation's kept
        # prompt, carried to the next run's first batch): no compaction can have taken them.
        self.unsent: set[int] = set()
        # Ids of the own messages whose write failed: never in the store, they keep their
        # places in the history (among the own messages around them) and are not looked for.
        self.failed_ids: set[int] = set()

    def committed(self, messages: Sequence[Message]) -> None:
        """The agent appended `messages` to its history and handed them to the writer."""
        self.own_pending.extend(messages)

    def amended(self, old: Message, new: Message) -> None:
        """The agent's committed message `old` is now `new` (an approval's edited arguments),
        and `new` is what its turn hands to the writer."""
        replace_amended(self.own_pending, old, new)

    def carried(self, messages: Sequence[Message]) -> None:
        """`messages` end the agent's history and are not handed to the writer yet."""
        self.own_pending.extend(messages)
        self.unsent.update(id(m) for m in messages)

    def sent(self) -> None:
        """The carried messages were handed to the writer."""
        self.unsent.clear()

    def failed(self, messages: Sequence[Message]) -> None:
        """The writes of `messages` (own, handed to the writer) failed: they never land."""
        pending = {id(m) for m in self.own_pending}
        self.failed_ids.update(i for m in messages if (i := id(m)) in pending)

    def forget(self, sequence: int) -> None:
        """The agent's history was cleared (reset): start over from `sequence`."""
        self.sequence = sequence
        self.own_pending.clear()
        self.unsent.clear()
        self.failed_ids.clear()

    def merge(
        self,
        history: list[Message],
        changes: Changes,
        policy: MemoryPolicy,
    ) -> list[Message] | None:
        """The history to run with after `changes`, or None when `history` stays as it is.

        `changes` must be read after every write of the agent's landed (in the session's
        order on its writer, as a run's start reads them): after a compaction
        (`changes.replaced`) the agent's own messages not in the new history were compacted
        away like the rest."""
        if changes.sequence == self.sequence and not changes.messages:
            return None  # nothing was committed since (a session still empty says replaced)
        if not policy.write:
            return self._merge_unwritten(history, changes, policy)
        own = list(self.own_pending)
        # What was never sent cannot be in the store (another agent's equal message is not
        # it), nor compacted away: it stays, in its place before what was sent.
        unsent = [m for m in own if id(m) in self.unsent]
        sent = [m for m in own if id(m) not in self.unsent] if unsent else own
        failed = self.failed_ids
        matched = 0
        foreign = False
        # The changes, with the own messages whose write failed put back where they were:
        # before the own message that followed them.
        merged: list[Message] = []
        for message in changes.messages:
            while failed and matched < len(sent) and id(sent[matched]) in failed:
                merged.append(sent[matched])
                matched += 1
            if matched < len(sent) and message == sent[matched]:
                matched += 1
            else:
                foreign = True
            merged.append(message)
        self.sequence = changes.sequence
        rest = sent[matched:]
        if changes.replaced:  # compacted away like the rest, but for what never was stored
            rest = [m for m in rest if id(m) in failed]
        unstored = [*unsent, *rest]
        self.own_pending = deque(unstored)
        if failed:
            self.failed_ids = {id(m) for m in rest if id(m) in failed}
        if not foreign and not changes.replaced:
            return None
        if changes.replaced:
            base = merged
        else:
            stable = history[: len(history) - len(own)] if own else history
            base = [*stable, *merged]
        return window([*base, *unstored], policy.last_n, policy.max_bytes)

    def _merge_unwritten(
        self, history: list[Message], changes: Changes, policy: MemoryPolicy
    ) -> list[Message]:
        """`merge` for an agent whose policy does not write: its own messages never reach
        the store, so they stay where they are in its history, and what the others committed
        since comes after them; after a compaction, its own messages still in its history
        follow the new history. Only those of its own messages the result keeps are tracked."""
        self.sequence = changes.sequence
        if changes.replaced:
            present = {id(m) for m in history}
            own = [m for m in self.own_pending if id(m) in present]
            merged = window([*changes.messages, *own], policy.last_n, policy.max_bytes)
        else:
            merged = window([*history, *changes.messages], policy.last_n, policy.max_bytes)
        kept = {id(m) for m in merged}
        self.own_pending = deque(m for m in self.own_pending if id(m) in kept)
        return merged
