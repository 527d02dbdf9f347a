"""`SessionMemory.auto_compact`: a session is compacted in the background once an append takes
it past the threshold, once per crossing, never blocking an append, and a failure is counted,
logged without content and tried again at the next append past the threshold."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from agent_runtime.llm import ProviderError
from agent_runtime.memory import InMemoryStore, SessionMemory, SqliteStore
from agent_runtime.memory._size import message_bytes
from agent_runtime.messages import Message
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from tests.agent_runtime.memory.compaction_helpers import (
    GatedModel,
    exchange,
    summary_texts,
    summary_turn,
)


class _RecordingStore(InMemoryStore):
    """An in-memory store that records the thread of every compaction commit."""

    def __init__(self) -> None:
        super().__init__()
        self.replace_threads: list[str] = []

    def replace(self, session: str, messages: Iterable[Message], expected_sequence: int) -> int:
        self.replace_threads.append(threading.current_thread().name)
        return super().replace(session, messages, expected_sequence)


@pytest.fixture
def store() -> _RecordingStore:
    return _RecordingStore()


@pytest.fixture
def memory(store: _RecordingStore) -> Iterator[SessionMemory]:
    with SessionMemory(store) as mem:
        yield mem


def threshold_after(*tags: str) -> int:
    """A threshold that the history of these exchanges reaches but does not pass."""
    return message_bytes([m for tag in tags for m in exchange(tag)])


def test_the_trigger_fires_once_past_the_threshold_and_not_below_it(
    memory: SessionMemory, store: _RecordingStore
) -> None:
    model = ScriptedModel([summary_turn("U: gist")])
    below = ("a", "b", "c", "d", "e")
    auto = memory.auto_compact(model, above_bytes=threshold_after(*below), keep_last=2)
    for tag in below:  # up to the threshold, not past it
        memory.append("s", exchange(tag))
        assert auto.pending() == 0  # decided by the append itself: nothing was queued
    assert model.call_count == 0
    memory.append("s", exchange("f"))  # past it
    assert auto.wait_idle(10)
    assert (auto.compactions, auto.failures, model.call_count) == (1, 0, 1)
    messages = memory.history("s").messages
    assert summary_texts(messages)[0] == "U: gist" and messages[2:] == exchange("f")
    assert store.replace_threads[0].startswith("memory-compaction")  # its own thread
    memory.append("s", exchange("g"))  # the compacted history is below the threshold again
    assert auto.pending() == 0 and model.call_count == 1


def test_appends_past_the_threshold_during_a_compaction_ask_for_no_second_one(
    memory: SessionMemory,
) -> None:
    model = GatedModel([summary_turn()])
    auto = memory.auto_compact(model, above_bytes=threshold_after("a", "b"), keep_last=2)
    for tag in ("a", "b", "c"):
        memory.append("s", exchange(tag))
    assert model.started.wait(10)
    late = [exchange(tag) for tag in ("late1", "late2", "late3")]
    for batch in late:  # each leaves the session past the threshold; none waits
        memory.append("s", batch)
        assert auto.pending() == 1
    model.release.set()
    assert auto.wait_idle(10)
    assert (auto.compactions, model.call_count) == (1, 1)
    messages = memory.history("s").messages
    assert messages[2:] == [*exchange("c"), *(m for batch in late for m in batch)]


def test_an_append_never_waits_for_the_compaction_in_flight(memory: SessionMemory) -> None:
    model = GatedModel([summary_turn()])
    auto = memory.auto_compact(model, above_bytes=threshold_after("a"), keep_last=0)
    memory.append("s", exchange("a"))
    memory.append("s", exchange("b"))
    assert model.started.wait(10)
    appender = threading.Thread(target=lambda: memory.append("s", exchange("c")))
    appender.start()
    appender.join(10)
    assert not appender.is_alive() and not model.release.is_set()
    assert memory.history("s").messages[-2:] == exchange("c")
    model.release.set()
    assert auto.wait_idle(10) and auto.compactions == 1


def test_a_failure_is_counted_logged_without_content_and_retried_at_the_next_crossing(
    memory: SessionMemory,
) -> None:
    secret = "SECRET-PLAN"
    model = ScriptedModel([f"not json: {secret}", summary_turn("U: retried")])
    auto = memory.auto_compact(model, above_bytes=threshold_after("a"), keep_last=0)
    memory.append("s", exchange("a"))
    with capture_logs() as logs:
        memory.append("s", exchange(secret))
        assert auto.wait_idle(10)
    assert (auto.failures, auto.compactions) == (1, 0)
    [failed] = [entry for entry in logs if entry["event"] == "memory.compaction.failed"]
    assert failed["session"] == "s" and failed["error_type"] == "StructuredOutputError"
    assert secret not in repr(logs)  # neither the history nor the model's answer
    assert len(memory.history("s").messages) == 4  # nothing was changed
    memory.append("s", exchange("c"))  # past the threshold again: tried again
    assert auto.wait_idle(10)
    assert (auto.failures, auto.compactions, model.call_count) == (1, 1, 2)
    assert summary_texts(memory.history("s").messages)[0] == "U: retried"


def test_close_aborts_a_compaction_in_flight_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    model = GatedModel([summary_turn()])
    memory = SessionMemory(SqliteStore(path))
    try:
        auto = memory.auto_compact(model, above_bytes=threshold_after("a"), keep_last=0)
        memory.append("s", exchange("a"))
        memory.append("s", exchange("b"))
        assert model.started.wait(10)
        memory.close()  # does not wait for the gated model: the call is aborted
        assert auto.pending() == 0 and auto.failures == 1
    finally:
        model.release.set()
        memory.close()
    with SessionMemory(SqliteStore(path)) as reopened:
        assert reopened.history("s").messages == [*exchange("a"), *exchange("b")]


def test_a_second_trigger_and_bad_arguments_are_refused(memory: SessionMemory) -> None:
    with pytest.raises(ValueError, match="invalid above_bytes 0"):
        memory.auto_compact(ScriptedModel([]), above_bytes=0)
    with pytest.raises(ValueError, match="invalid keep_last -1"):
        memory.auto_compact(ScriptedModel([]), above_bytes=10, keep_last=-1)
    with pytest.raises(TypeError, match="expected a ChatModel"):
        memory.auto_compact("gpt", above_bytes=10)  # type: ignore[arg-type]
    memory.auto_compact(ScriptedModel([]), above_bytes=10)
    with pytest.raises(RuntimeError, match="already compacts automatically"):
        memory.auto_compact(ScriptedModel([]), above_bytes=10)


def test_a_failed_turn_error_is_counted_too(memory: SessionMemory) -> None:
    model = ScriptedModel([ScriptedTurn(error=ProviderError("upstream down"))])
    auto = memory.auto_compact(model, above_bytes=threshold_after("a"), keep_last=0)
    memory.append("s", exchange("a"))
    memory.append("s", exchange("b"))
    wait_until(lambda: auto.failures == 1, timeout=10)
    assert auto.wait_idle(10) and len(memory.history("s").messages) == 4
