"""An agent's view of its session (`SessionMirror`): what it merges in at a run's start keeps
the session's commit order and the agent's own messages, also those whose write failed."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from agent_runtime.agent._session_sync import SessionMirror
from agent_runtime.memory import MemoryPolicy
from agent_runtime.messages import Message, UserMessage

POLICY = MemoryPolicy()  # reads and writes, no window


@dataclass(frozen=True)
class Changes:
    messages: list[Message]
    sequence: int
    replaced: bool = False


def said(*texts: str) -> list[Message]:
    return [UserMessage(content=text) for text in texts]


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]  # type: ignore[union-attr]


def test_a_turn_whose_write_failed_keeps_its_place_among_the_others_turns() -> None:
    mirror = SessionMirror(0)
    own = said("one", "ans1", "two", "ans2", "three", "ans3")
    mirror.committed(own)
    mirror.failed(own[2:4])  # "two" never reached the store
    store = [*own[:2], *said("theirs"), *own[4:]]
    merged = mirror.merge(list(own), Changes(store, 7), POLICY)
    assert merged is not None
    assert texts(merged) == ["one", "ans1", "two", "ans2", "theirs", "three", "ans3"]
    assert not mirror.own_pending  # nothing of its own is looked for in the store any more
    later = said("later")
    assert mirror.merge(merged, Changes(later, 8), POLICY) == [*merged, *later]


def test_after_a_compaction_a_turn_never_stored_is_kept() -> None:
    mirror = SessionMirror(0)
    own = said("one", "ans1", "two", "ans2")
    mirror.committed(own)
    mirror.failed(own[2:])
    summary = said("summary")
    merged = mirror.merge(list(own), Changes(summary, 9, replaced=True), POLICY)
    assert merged is not None and texts(merged) == ["summary", "two", "ans2"]


@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 2)), min_size=1, max_size=12),
    st.integers(0, 3),
)
def test_the_merge_is_the_commit_order_with_failed_writes_in_their_places(
    own_spec: list[tuple[bool, int]], trailing_foreign: int
) -> None:
    # Each own message: whether its write failed, and how many foreign messages another agent
    # committed just before it landed (ignored for a failed one: it never landed).
    own = said(*(f"own{i}" for i in range(len(own_spec))))
    mirror = SessionMirror(0)
    mirror.committed(own)
    mirror.failed([m for m, (failed, _) in zip(own, own_spec, strict=True) if failed])
    store: list[Message] = []
    expected: list[Message] = []
    waiting: list[Message] = []  # failed ones, placed before the next own message that landed
    foreign_count = 0
    for message, (failed, before) in zip(own, own_spec, strict=True):
        if failed:
            waiting.append(message)
            continue
        foreign = said(*(f"x{foreign_count + k}" for k in range(before)))
        foreign_count += before
        store += [*foreign, message]
        # A failed one goes right after the own message before it: ahead of what others
        # committed after that (its write came before theirs could be told apart).
        expected += [*waiting, *foreign, message]
        waiting = []
    tail = said(*(f"x{foreign_count + k}" for k in range(trailing_foreign)))
    store += tail
    expected += [*waiting, *tail]
    merged = mirror.merge(list(own), Changes(store, 1), POLICY)
    result = list(own) if merged is None else merged
    assert texts(result) == texts(expected)
