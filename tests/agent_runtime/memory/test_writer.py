"""SessionWriter: appends that never block the caller, committed one batch at a time in order per
session, independently across sessions, each with its own outcome, and drained by close."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from agent_runtime.memory import InMemoryStore, SessionMemory, SessionWriter, SqliteStore
from agent_runtime.memory._writer import WORKERS
from agent_runtime.messages import Message, UserMessage
from agent_runtime.testing import wait_until
from tests.agent_runtime.memory.conftest import batch, texts

_names = itertools.count()


class GatedStore(InMemoryStore):
    """An InMemoryStore that records every append and holds those of the `gated` sessions (all
    sessions when `gated` is None) until `release` is set."""

    def __init__(self, gated: Iterable[str] | None = None) -> None:
        super().__init__()
        self.gated = None if gated is None else set(gated)
        self.release = threading.Event()
        self.calls: list[str] = []

    def append(self, session: str, messages: Iterable[Message]) -> int:
        self.calls.append(session)
        if (self.gated is None or session in self.gated) and not self.release.wait(10):
            raise TimeoutError("the test never released the store")
        return super().append(session, messages)


class FailingStore(InMemoryStore):
    """An InMemoryStore that refuses every batch whose first message is tagged `boom`."""

    def append(self, session: str, messages: Iterable[Message]) -> int:
        batch = list(messages)
        if batch and texts(batch[:1])[0].startswith("boom/"):
            raise OSError("disk full")
        return super().append(session, batch)


@pytest.fixture
def open_writer() -> Iterator[Callable[[InMemoryStore | SqliteStore], SessionWriter]]:
    """Open a writer over a memory on the given store; every one is released, closed (drained)
    and its memory closed at the end of the test."""
    opened: list[tuple[SessionWriter, SessionMemory]] = []

    def open_(store: InMemoryStore | SqliteStore) -> SessionWriter:
        memory = SessionMemory(store)
        writer = SessionWriter(memory, name=f"test-writer-{next(_names)}")
        opened.append((writer, memory))
        return writer

    yield open_
    for writer, memory in opened:
        if isinstance(memory.store, GatedStore):
            memory.store.release.set()
        assert writer.close(timeout=10), "a writer did not drain at teardown"
        memory.close()


def _apart_from(writer: SessionWriter, session: str) -> str:
    """Another session (SessionMemory serialises each session's changes alone)."""
    return "B" if session != "B" else "C"


def _writer_threads(writer: SessionWriter) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"{writer.name}-")]


def _stored_batches(messages: list[Message]) -> list[tuple[str, int]]:
    """The `(tag, size)` of each batch in a history of `batch(tag, size)` batches, in order;
    fails if a batch is split, cut short or interleaved with another."""
    found: list[tuple[str, int]] = []
    for text in texts(messages):
        tag, index = text.rsplit("/", 1)
        if found and found[-1][0] == tag:
            assert int(index) == found[-1][1], f"{text!r} is out of place in its batch"
            found[-1] = (tag, found[-1][1] + 1)
        else:
            assert index == "0", f"{text!r} starts a batch in the middle"
            found.append((tag, 1))
    return found


SESSIONS = ["a", "b", "c", "d"]
submissions = st.lists(
    st.tuples(
        st.integers(0, 3),  # the submitting thread
        st.sampled_from(SESSIONS),
        st.integers(0, 4),  # the batch size
    ),
    max_size=40,
)


@settings(deadline=None, max_examples=60)
@given(plan=submissions)
def test_each_sessions_batches_commit_whole_in_submission_order(
    plan: list[tuple[int, str, int]],
) -> None:
    per_thread: dict[int, list[tuple[str, str, int]]] = {}
    for k, (thread, session, size) in enumerate(plan):
        per_thread.setdefault(thread, []).append((session, f"{thread}:{k}", size))
    memory = SessionMemory(InMemoryStore())
    writer = SessionWriter(memory, name=f"test-writer-{next(_names)}")
    start = threading.Barrier(len(per_thread) + 1)
    futures: list[Future[None]] = []

    def submit(ops: list[tuple[str, str, int]]) -> None:
        start.wait(5)
        for session, tag, size in ops:
            futures.append(writer.append(session, batch(tag, size)))

    submitters = [threading.Thread(target=submit, args=(ops,)) for ops in per_thread.values()]
    for t in submitters:
        t.start()
    start.wait(5)
    for t in submitters:
        t.join(5)
    assert writer.flush(timeout=10)
    assert all(f.result(timeout=0) is None for f in futures)
    for session in SESSIONS:
        stored = _stored_batches(memory.history(session).messages)
        for ops in per_thread.values():
            mine = {tag for _, tag, _ in ops}
            expected = [(tag, size) for s, tag, size in ops if s == session and size]
            assert [b for b in stored if b[0] in mine] == expected
        assert len(stored) == len([op for op in plan if op[1] == session and op[2]])
    assert writer.close()
    memory.close()


def test_a_stuck_session_does_not_hold_up_another(open_writer: Any) -> None:
    store = GatedStore(gated={"A"})
    writer = open_writer(store)
    stuck = writer.append("A", batch("a"))
    wait_until(lambda: "A" in store.calls, what="A's commit started")
    assert writer.append(_apart_from(writer, "A"), batch("b")).result(timeout=5) is None
    assert not stuck.done()
    store.release.set()
    assert stuck.result(timeout=5) is None
    assert texts(writer.memory.history("A").messages) == texts(batch("a"))


def test_a_session_commits_one_batch_at_a_time(open_writer: Any) -> None:
    store = GatedStore(gated={"A"})
    writer = open_writer(store)
    first = writer.append("A", batch("a1"))
    wait_until(lambda: "A" in store.calls, what="A's first commit started")
    second = writer.append("A", batch("a2"))
    # B was queued after A's second batch: once B is committed, a free thread has passed the
    # second batch by, which it may do only because A's first is still in progress.
    assert writer.append(_apart_from(writer, "A"), batch("b")).result(timeout=5) is None
    assert store.calls.count("A") == 1
    assert not second.done()
    store.release.set()
    assert first.result(timeout=5) is None
    assert second.result(timeout=5) is None
    assert texts(writer.memory.history("A").messages) == texts(batch("a1") + batch("a2"))


def test_append_on_a_running_event_loop_returns_before_the_commit(open_writer: Any) -> None:
    store = GatedStore()
    writer = open_writer(store)

    async def run() -> None:
        future = writer.append("s", batch("turn"))  # a blocking append would stall here
        assert not future.done()
        ticks = 0
        while ticks < 3:  # the loop keeps running while the commit waits
            await asyncio.sleep(0)
            ticks += 1
        store.release.set()
        assert await asyncio.wait_for(asyncio.wrap_future(future), timeout=5) is None

    asyncio.run(run())
    assert texts(writer.memory.history("s").messages) == texts(batch("turn"))


def test_cancelling_the_wait_never_cancels_the_write(open_writer: Any) -> None:
    store = GatedStore()
    writer = open_writer(store)
    future = writer.append("s", batch("turn"))

    async def abandon() -> None:
        waiter = asyncio.ensure_future(asyncio.wrap_future(future))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    asyncio.run(abandon())
    assert not future.cancel()
    store.release.set()
    assert future.result(timeout=5) is None
    assert texts(writer.memory.history("s").messages) == texts(batch("turn"))


def test_a_failed_batch_fails_only_its_future_and_later_batches_commit(
    open_writer: Any,
) -> None:
    writer = open_writer(FailingStore())
    with capture_logs() as logs:
        before = writer.append("s", batch("ok1"))
        failed = writer.append("s", batch("boom", 2))
        after = writer.append("s", batch("ok2"))
        assert after.result(timeout=5) is None
    assert before.result(timeout=0) is None
    with pytest.raises(OSError, match="disk full"):
        failed.result(timeout=0)
    assert texts(writer.memory.history("s").messages) == texts(batch("ok1") + batch("ok2"))
    failures = [e for e in logs if e["event"] == "memory.append.failed"]
    assert [(e["session"], e["count"], e["log_level"]) for e in failures] == [("s", 2, "error")]


def test_close_drains_every_accepted_batch_then_rejects(open_writer: Any) -> None:
    store = GatedStore()
    writer = open_writer(store)
    futures = [writer.append(s, batch(f"{s}{i}")) for i in range(3) for s in "AB"]
    assert not writer.close(timeout=0.01), "the store is held: close cannot have drained"
    with pytest.raises(RuntimeError, match=r"session writer 'test-writer-\d+' is closed"):
        writer.append("A", batch("late"))
    store.release.set()
    assert writer.close(timeout=5)
    assert all(f.result(timeout=0) is None for f in futures)
    for s in "AB":
        expected = texts([m for i in range(3) for m in batch(f"{s}{i}")])
        assert texts(writer.memory.history(s).messages) == expected
    assert _writer_threads(writer) == []
    assert writer.close(timeout=0), "closing again is a no-op"


def test_a_close_that_times_out_is_logged(open_writer: Any) -> None:
    store = GatedStore()
    writer = open_writer(store)
    writer.append("s", batch("held"))
    with capture_logs() as logs:
        assert not writer.close(timeout=0.01)
    assert [(e["event"], e["pending"]) for e in logs] == [("memory.writer.close_timed_out", 1)]


def test_closed_writers_batches_are_in_the_sqlite_file(open_writer: Any, tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    writer = open_writer(SqliteStore(path))
    for i in range(20):
        writer.append(f"s{i % 4}", batch(f"t{i}", 2))
    assert writer.close(timeout=10)
    writer.memory.close()
    with SqliteStore(path) as reopened:
        for j in range(4):
            expected = [m for i in range(j, 20, 4) for m in batch(f"t{i}", 2)]
            assert texts(reopened.load(f"s{j}").messages) == texts(expected)


def test_an_empty_batch_completes_at_once_without_the_store(open_writer: Any) -> None:
    store = GatedStore()  # a batch that reached the store would be held there
    writer = open_writer(store)
    future = writer.append("s", [])
    assert future.done()
    assert future.result(timeout=0) is None
    assert store.calls == []
    assert writer.pending() == 0


@pytest.mark.parametrize(
    ("session", "messages", "error", "match"),
    [
        (42, batch("x"), TypeError, "invalid session 42"),
        ("", batch("x"), ValueError, "invalid session ''"),
        ("s", "hello", TypeError, "invalid messages 'hello'"),
        ("s", [UserMessage(content="ok"), "nope"], TypeError, r"invalid messages\[1\] 'nope'"),
    ],
)
def test_bad_input_is_refused_at_append(
    open_writer: Any, session: Any, messages: Any, error: type[Exception], match: str
) -> None:
    store = GatedStore()
    writer = open_writer(store)
    with pytest.raises(error, match=match):
        writer.append(session, messages)
    assert writer.pending() == 0
    assert store.calls == []


def test_pending_and_flush_track_accepted_batches(open_writer: Any) -> None:
    store = GatedStore()
    writer = open_writer(store)
    for i in range(3):
        writer.append("s", batch(f"b{i}"))
    assert writer.pending() == 3
    assert not writer.flush(timeout=0.01)
    store.release.set()
    assert writer.flush(timeout=5)
    assert writer.pending() == 0
    assert len(writer.memory.history("s").messages) == 9


def test_flush_of_one_session_waits_for_that_session_alone(open_writer: Any) -> None:
    store = GatedStore(gated={"A"})
    writer = open_writer(store)
    other = _apart_from(writer, "A")
    stuck = writer.append("A", batch("a"))
    writer.append(other, batch("b1"))
    writer.append(other, batch("b2"))
    assert writer.flush(timeout=5, session=other)
    assert len(writer.memory.history(other).messages) == 6
    assert writer.flush(timeout=5, session="nobody")  # nothing pending: at once
    assert not writer.flush(timeout=0.01, session="A") and not stuck.done()
    store.release.set()
    assert writer.flush(timeout=5, session="A") and stuck.done()


def test_the_writer_owns_a_fixed_number_of_threads_however_many_sessions(
    open_writer: Any,
) -> None:
    store = GatedStore()
    writer = open_writer(store)
    for i in range(500):
        writer.append(f"session-{i}", batch("t", 1))
    wait_until(lambda: store.calls, what="a commit is held")
    threads = _writer_threads(writer)
    assert len(threads) == WORKERS == 2
    assert all(t.daemon for t in threads)
    store.release.set()
    assert writer.flush(timeout=10)
    assert len(writer.memory.sessions()) == 500


def test_the_writer_needs_a_session_memory() -> None:
    with pytest.raises(TypeError, match="invalid memory"):
        SessionWriter(InMemoryStore())  # type: ignore[arg-type]
