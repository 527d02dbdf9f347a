"""SessionMemory: history, append, optimistic compaction, and subscriptions that see every change
in order, never block writers, and can be closed."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_runtime import StreamOverflow
from agent_runtime.config import MemoryConfig
from agent_runtime.memory import (
    ConcurrentModification,
    InMemoryStore,
    MemoryAdded,
    MemoryCompacted,
    MemoryEvent,
    MemoryEventAdapter,
    MemorySubscription,
    SessionMemory,
    SqliteStore,
)
from agent_runtime.messages import Message
from agent_runtime.testing import wait_until
from tests.agent_runtime.memory.conftest import STORE_KINDS, batch, open_store, texts
from tests.agent_runtime.strategies import messages as any_message


@pytest.fixture(params=STORE_KINDS)
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionMemory]:
    with SessionMemory(open_store(request, request.param, tmp_path)) as opened:
        yield opened


def _drain(sub: MemorySubscription) -> list[MemoryEvent]:
    return list(sub.events(timeout=0))


def test_append_returns_the_sequence_and_history_reads_it_back(memory: SessionMemory) -> None:
    assert memory.append("s", batch("a")) == 1
    assert memory.append("s", batch("b")) == 2
    history = memory.history("s")
    assert history.sequence == 2
    assert texts(history.messages) == texts(batch("a") + batch("b"))
    assert memory.sessions() == ["s"]


def test_compact_with_the_sequence_read_replaces_the_history(memory: SessionMemory) -> None:
    memory.append("s", batch("a"))
    history = memory.history("s")
    assert memory.compact("s", batch("summary", 1), history.sequence) == 2
    assert memory.history("s").messages == batch("summary", 1)


def test_compact_after_the_history_moved_on_raises_and_changes_nothing(
    memory: SessionMemory,
) -> None:
    memory.append("s", batch("a"))
    stale = memory.history("s").sequence
    memory.append("s", batch("b"))
    before = memory.history("s")
    with memory.subscribe("s") as sub:
        with pytest.raises(ConcurrentModification) as caught:
            memory.compact("s", [], stale)
        assert (caught.value.expected, caught.value.actual) == (1, 2)
        assert memory.history("s") == before
        assert _drain(sub) == []


def test_a_subscriber_sees_added_and_compacted_events_in_order(memory: SessionMemory) -> None:
    with memory.subscribe("s") as sub:
        memory.append("s", batch("a"))
        memory.append("other", batch("x"))
        memory.compact("s", batch("sum", 1), 1)
        memory.append("s", batch("b", 1))
        memory.append("s", [])  # nothing changes, nothing is reported
        events = _drain(sub)
    size = {tag: len(batch(tag, 1)[0].model_dump_json().encode()) for tag in ("a", "sum", "b")}
    size["sum+b"] = size["sum"] + size["b"]
    assert events == [
        MemoryAdded(session="s", messages=batch("a"), sequence=1, bytes=3 * size["a"]),
        MemoryCompacted(session="s", messages=batch("sum", 1), sequence=2, bytes=size["sum"]),
        MemoryAdded(session="s", messages=batch("b", 1), sequence=3, bytes=size["sum+b"]),
    ]


def test_delete_is_reported_as_a_compaction_to_nothing(memory: SessionMemory) -> None:
    memory.append("s", batch("a"))
    with memory.subscribe("s") as sub:
        assert memory.delete("s") == 2
        assert memory.delete("s") is None
        assert _drain(sub) == [MemoryCompacted(session="s", messages=[], sequence=2)]
    assert memory.sessions() == []


def test_events_of_concurrent_writers_arrive_in_sequence_order(memory: SessionMemory) -> None:
    threads, batches = 4, 25
    start = threading.Barrier(threads)

    def writer(t: int) -> None:
        start.wait(timeout=5)
        for b in range(batches):
            memory.append("s", batch(f"{t}:{b}", 2))

    with memory.subscribe("s", max_queue=threads * batches) as sub:
        workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=30)
        events = _drain(sub)
    assert [e.sequence for e in events] == list(range(1, threads * batches + 1))
    replayed = [text for e in events for text in texts(e.messages)]
    assert replayed == texts(memory.history("s").messages)


class _PausingAfterCommit(InMemoryStore):
    """Pauses after committing every other batch: a writer slow to report what it committed."""

    def append(self, session: str, messages: Iterable[Message]) -> int:
        sequence = super().append(session, messages)
        if sequence % 2:
            time.sleep(0.002)  # widens the race window; not used to synchronise
        return sequence


def test_events_stay_in_commit_order_when_a_writer_is_slow_to_report() -> None:
    threads, batches = 4, 10
    start = threading.Barrier(threads)
    with SessionMemory(_PausingAfterCommit()) as memory, memory.subscribe("s") as sub:

        def writer(t: int) -> None:
            start.wait(timeout=5)
            for b in range(batches):
                memory.append("s", batch(f"{t}:{b}", 1))

        workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=30)
        assert [e.sequence for e in _drain(sub)] == list(range(1, threads * batches + 1))


def test_a_reader_blocked_in_poll_gets_the_next_event(memory: SessionMemory) -> None:
    sub = memory.subscribe("s")
    got: list[MemoryEvent | None] = []
    reader = threading.Thread(target=lambda: got.append(sub.poll(timeout=10)))
    reader.start()
    memory.append("s", batch("a", 1))
    reader.join(timeout=10)
    size = len(batch("a", 1)[0].model_dump_json().encode())
    assert got == [MemoryAdded(session="s", messages=batch("a", 1), sequence=1, bytes=size)]


def test_poll_returns_none_after_its_timeout(memory: SessionMemory) -> None:
    with memory.subscribe("s") as sub:
        assert sub.poll(timeout=0.01) is None
        assert not sub.closed


def test_close_wakes_a_blocked_reader_after_the_queued_events(memory: SessionMemory) -> None:
    sub = memory.subscribe("s")
    memory.append("s", batch("a", 1))
    seen: list[MemoryEvent] = []
    reader = threading.Thread(target=lambda: seen.extend(sub))
    reader.start()
    wait_until(lambda: len(seen) == 1, what="the queued event was read")
    sub.close()
    reader.join(timeout=5)
    assert not reader.is_alive()
    memory.append("s", batch("b", 1))
    assert sub.poll(timeout=0) is None
    assert [e.sequence for e in seen] == [1]


def test_a_full_queue_closes_the_subscription_without_blocking_the_writer(
    memory: SessionMemory,
) -> None:
    sub = memory.subscribe("s", max_queue=2)
    for n in range(5):
        memory.append("s", batch(f"b{n}", 1))  # returns although nobody reads
    assert sub.closed and sub.overflowed
    assert [e.sequence for e in (sub.poll(0), sub.poll(0)) if e is not None] == [1, 2]
    with pytest.raises(StreamOverflow, match="'s'"):
        sub.poll(0)
    assert memory.history("s").sequence == 5


def test_a_dropped_subscription_is_collected(memory: SessionMemory) -> None:
    sub = memory.subscribe("s")
    ref = weakref.ref(sub)
    del sub
    gc.collect()
    assert ref() is None
    memory.append("s", batch("a"))  # publishing to nobody is fine
    assert memory.history("s").sequence == 1


def test_closing_the_memory_ends_subscriptions_and_the_store(tmp_path: Path) -> None:
    memory = SessionMemory(InMemoryStore())
    sub = memory.subscribe("s")
    memory.close()
    assert sub.closed and sub.poll(timeout=None) is None
    with pytest.raises(ValueError, match="closed"):
        memory.history("s")


def test_default_is_a_durable_sqlite_store(tmp_path: Path) -> None:
    path = tmp_path / "state" / "memory.sqlite3"
    with SessionMemory.default(path) as memory:
        assert isinstance(memory.store, SqliteStore)
        memory.append("s", batch("a"))
    with SessionMemory.default(str(path)) as memory:
        assert texts(memory.history("s").messages) == texts(batch("a"))


def test_from_config_picks_the_configured_store(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite3"
    with SessionMemory.from_config(MemoryConfig(path=str(path))) as memory:
        assert isinstance(memory.store, SqliteStore)
    assert path.exists()
    with SessionMemory.from_config(MemoryConfig(store="memory")) as memory:
        assert isinstance(memory.store, InMemoryStore)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(TypeError, match="store"):
        SessionMemory("memory.sqlite3")  # type: ignore[arg-type]
    with SessionMemory(InMemoryStore()) as memory:
        with pytest.raises(ValueError, match="session"):
            memory.append("", batch("a"))
        with pytest.raises(TypeError, match="messages"):
            memory.compact("s", "summary", 0)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="max_queue"):
            memory.subscribe("s", max_queue=0)
        assert memory.sessions() == []


@given(
    session=st.text(min_size=1, max_size=10),
    messages=st.lists(any_message, max_size=3),
    sequence=st.integers(min_value=1, max_value=2**62),
    compacted=st.booleans(),
)
def test_events_round_trip_through_json(
    session: str, messages: list[Message], sequence: int, compacted: bool
) -> None:
    cls = MemoryCompacted if compacted else MemoryAdded
    event = cls(session=session, messages=messages, sequence=sequence)
    assert MemoryEventAdapter.validate_json(event.model_dump_json()) == event
