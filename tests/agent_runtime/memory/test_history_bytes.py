"""`MemoryAdded.bytes` and `MemoryCompacted.bytes`: the history's size after each change, the
sum of its messages' UTF-8 JSON lengths."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_runtime.memory import (
    InMemoryStore,
    MemoryAdded,
    MemoryCompacted,
    MemoryEvent,
    SessionMemory,
    SqliteStore,
)
from agent_runtime.messages import Message, UserMessage
from tests.agent_runtime.memory.conftest import batch


def size(messages: list[Message]) -> int:
    return sum(len(m.model_dump_json().encode("utf-8")) for m in messages)


def change(memory: SessionMemory, kind: str, messages: list[Message]) -> None:
    if kind == "append":
        memory.append("s", messages)
    elif kind == "compact":
        memory.compact("s", messages, memory.history("s").sequence)
    else:
        memory.delete("s")


def drain(memory: SessionMemory, changes: list[tuple[str, list[Message]]]) -> list[MemoryEvent]:
    events: list[MemoryEvent] = []
    with memory.subscribe("s") as sub:
        for kind, messages in changes:
            change(memory, kind, messages)
        while (event := sub.poll(timeout=0)) is not None:
            events.append(event)
    return events


def test_every_change_reports_the_size_of_the_history_after_it() -> None:
    with SessionMemory(InMemoryStore()) as memory:
        a, b, summary = batch("a"), [UserMessage(content="ünïcode ✓", timestamp=0.0)], batch("s", 1)
        events = drain(
            memory,
            [("append", a), ("append", b), ("compact", summary), ("delete", []), ("append", a)],
        )
    assert [(type(e), e.bytes) for e in events] == [
        (MemoryAdded, size(a)),
        (MemoryAdded, size(a) + size(b)),  # UTF-8 bytes, not characters
        (MemoryCompacted, size(summary)),
        (MemoryCompacted, 0),
        (MemoryAdded, size(a)),
    ]


def test_a_history_stored_before_this_object_existed_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    with SessionMemory(SqliteStore(path)) as first:
        first.append("s", batch("old"))
    with SessionMemory(SqliteStore(path)) as second:
        [event] = drain(second, [("append", batch("new", 1))])
    assert event.bytes == size([*batch("old"), *batch("new", 1)])


_changes = st.lists(
    st.tuples(
        st.sampled_from(["append", "compact", "delete"]),
        st.lists(st.text(max_size=8), max_size=3).map(
            lambda texts: [UserMessage(content=t, timestamp=0.0) for t in texts]
        ),
    ),
    max_size=8,
)


@settings(max_examples=50)
@given(_changes)
def test_the_reported_size_is_always_that_of_the_stored_history(
    changes: list[tuple[str, list[Message]]],
) -> None:
    with SessionMemory(InMemoryStore()) as memory, memory.subscribe("s") as sub:
        for kind, messages in changes:
            change(memory, kind, messages)
            event = sub.poll(timeout=0)
            if event is not None:
                assert event.bytes == size(memory.history("s").messages)
