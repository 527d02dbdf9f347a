"""`changes(session, since)` on every store: exactly what was appended after `since`, or the whole
history once a compaction or delete came after it; and a reader that follows a session with it
ends with the session's history, whatever ran meanwhile."""

from __future__ import annotations

import contextlib
import itertools
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_runtime.memory import (
    ConcurrentModification,
    InMemoryStore,
    MemoryStore,
    SessionChanges,
    SessionMemory,
)
from agent_runtime.messages import Message
from tests.agent_runtime.memory.conftest import batch, texts

_sessions = itertools.count()


def test_appends_after_since_are_returned_exactly_in_commit_order(store: MemoryStore) -> None:
    store.append("s", batch("a"))
    since = store.load("s").sequence
    store.append("s", batch("b", 2))
    store.append("other", batch("x"))
    store.append("s", batch("c", 1))
    assert store.changes("s", since) == SessionChanges(
        messages=batch("b", 2) + batch("c", 1), sequence=3, replaced=False
    )


def test_nothing_changed_since_the_current_sequence(store: MemoryStore) -> None:
    store.append("s", batch("a"))
    store.append("s", batch("b"))
    assert store.changes("s", 2) == SessionChanges(messages=[], sequence=2, replaced=False)


def test_from_zero_the_whole_history_is_returned_as_replaced(store: MemoryStore) -> None:
    assert store.changes("nobody", 0) == SessionChanges(messages=[], sequence=0, replaced=True)
    store.append("s", batch("a"))
    store.append("s", batch("b"))
    assert store.changes("s", 0) == SessionChanges(
        messages=batch("a") + batch("b"), sequence=2, replaced=True
    )


def test_a_compaction_after_since_returns_the_whole_compacted_history(store: MemoryStore) -> None:
    store.append("s", batch("a"))
    store.append("s", batch("b"))
    store.replace("s", batch("summary", 1), 2)
    store.append("s", batch("c", 1))
    for since in (1, 2):
        assert store.changes("s", since) == SessionChanges(
            messages=batch("summary", 1) + batch("c", 1), sequence=4, replaced=True
        )


def test_a_reader_of_the_compacted_history_gets_only_later_appends(store: MemoryStore) -> None:
    store.append("s", batch("a"))
    compacted = store.replace("s", batch("summary", 1), 1)
    store.append("s", batch("c", 1))
    assert store.changes("s", compacted) == SessionChanges(
        messages=batch("c", 1), sequence=3, replaced=False
    )


def test_a_delete_after_since_replaces_the_history_with_what_came_after(
    store: MemoryStore,
) -> None:
    store.append("s", batch("a"))
    deleted = store.delete("s")
    assert store.changes("s", 1) == SessionChanges(messages=[], sequence=2, replaced=True)
    store.append("s", batch("again", 1))
    assert store.changes("s", 1) == SessionChanges(
        messages=batch("again", 1), sequence=3, replaced=True
    )
    assert deleted is not None
    assert store.changes("s", deleted) == SessionChanges(
        messages=batch("again", 1), sequence=3, replaced=False
    )


def test_a_reader_ahead_of_the_store_gets_the_whole_history(store: MemoryStore) -> None:
    store.append("s", batch("a"))
    assert store.changes("s", 7) == SessionChanges(messages=batch("a"), sequence=1, replaced=True)
    assert store.changes("nobody", 3) == SessionChanges(messages=[], sequence=0, replaced=True)


@pytest.mark.parametrize(
    ("since", "error"), [(-1, ValueError), (True, TypeError), ("1", TypeError), (None, TypeError)]
)
def test_since_must_be_an_int_at_least_zero(store: MemoryStore, since: Any, error: type) -> None:
    with pytest.raises(error, match="since"):
        store.changes("s", since)
    with pytest.raises(TypeError, match="session"):
        store.changes(5, 0)  # type: ignore[arg-type]


def test_the_returned_list_is_a_copy(store: MemoryStore) -> None:
    store.append("s", batch("a"))
    store.changes("s", 0).messages.clear()
    store.append("s", batch("b"))
    store.changes("s", 1).messages.clear()
    assert len(store.load("s").messages) == 6


def _follow(reader: list[Message], change: SessionChanges) -> list[Message]:
    """A reader's history after it applied `change` (what an agent merging others' commits
    does)."""
    return list(change.messages) if change.replaced else reader + change.messages


# One step of a random schedule: append a batch, compact to the last n, or delete.
_steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3)),
        st.tuples(st.just("compact"), st.integers(0, 2)),
        st.tuples(st.just("delete"), st.just(0)),
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=_steps, data=st.data())
def test_applying_changes_to_the_history_at_since_gives_the_history_now(
    store: MemoryStore, steps: list[tuple[str, int]], data: st.DataObject
) -> None:
    session = f"p{next(_sessions)}"
    seen: dict[int, list[Message]] = {0: []}  # the history at each sequence
    for n, (op, size) in enumerate(steps):
        current = store.load(session)
        if op == "append":
            store.append(session, batch(f"{n}", size))
        elif op == "compact":
            store.replace(session, current.messages[-size:] if size else [], current.sequence)
        else:
            store.delete(session)
        after = store.load(session)
        seen[after.sequence] = after.messages
    now = store.load(session)
    since = data.draw(st.sampled_from(sorted(seen)), label="since")
    change = store.changes(session, since)
    assert change.sequence == now.sequence
    assert _follow(seen[since], change) == now.messages


def test_a_follower_polling_during_appends_and_compactions_ends_with_the_history(
    store: MemoryStore,
) -> None:
    # Followers (agents merging what others committed) poll while a writer appends and a
    # compactor compacts: whatever they read in between, each ends equal to the history.
    rounds = 60
    done = threading.Event()
    start = threading.Barrier(3)

    def writer() -> None:
        start.wait(timeout=5)
        for n in range(rounds):
            store.append("s", batch(f"w{n}", 2))
        done.set()

    def compactor() -> None:
        start.wait(timeout=5)
        while not done.is_set():
            current = store.load("s")
            with contextlib.suppress(ConcurrentModification):
                store.replace("s", current.messages[-4:], current.sequence)

    threads = [threading.Thread(target=writer), threading.Thread(target=compactor)]
    for thread in threads:
        thread.start()
    start.wait(timeout=5)
    reader: list[Message] = []
    since = 0
    while not done.is_set():
        change = store.changes("s", since)
        reader, since = _follow(reader, change), change.sequence
    for thread in threads:
        thread.join(timeout=30)
    change = store.changes("s", since)
    reader = _follow(reader, change)
    final = store.load("s")
    assert change.sequence == final.sequence
    assert texts(reader) == texts(final.messages)
    assert texts(final.messages)[-2:] == [f"w{rounds - 1}/0", f"w{rounds - 1}/1"]


def test_session_memory_changes_reads_its_store() -> None:
    with SessionMemory(InMemoryStore()) as memory:
        memory.append("s", batch("a"))
        memory.append("s", batch("b"))
        assert memory.changes("s", 1) == SessionChanges(
            messages=batch("b"), sequence=2, replaced=False
        )
        with pytest.raises(ValueError, match="since"):
            memory.changes("s", -1)


def test_session_changes_round_trip_through_json() -> None:
    change = SessionChanges(messages=batch("a", 2), sequence=4, replaced=True)
    assert SessionChanges.model_validate_json(change.model_dump_json()) == change
    with pytest.raises(ValueError, match="frozen"):
        change.replaced = False  # type: ignore[misc]
