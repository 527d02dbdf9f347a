"""The MemoryStore contract, run on every store (in-memory, SQLite, Postgres): sequences, atomic
batches, optimistic compaction, deletion, sizes, bad input, thread safety and JSON round trips.
`changes` and the key-value state have their own files (test_changes.py, test_state.py)."""

from __future__ import annotations

import contextlib
import itertools
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_runtime import AgentRuntimeError
from agent_runtime.memory import ConcurrentModification, MemoryStore
from agent_runtime.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from tests.agent_runtime.memory.conftest import batch, expected, texts
from tests.agent_runtime.strategies import messages as any_message

_sessions = itertools.count()


def test_an_unknown_session_is_empty_at_sequence_zero(store: MemoryStore) -> None:
    assert store.load("nobody") == expected([], 0)
    assert store.sessions() == []


def test_each_append_adds_one_to_the_sequence_and_keeps_order(store: MemoryStore) -> None:
    assert store.append("s", batch("a")) == 1
    assert store.append("s", batch("b", 2)) == 2
    history = store.load("s")
    assert history.sequence == 2
    assert texts(history.messages) == ["a/0", "a/1", "a/2", "b/0", "b/1"]


def test_an_empty_append_changes_nothing(store: MemoryStore) -> None:
    assert store.append("s", []) == 0
    assert store.sessions() == []
    store.append("s", batch("a"))
    assert store.append("s", iter([])) == 1
    assert store.load("s").sequence == 1


def test_sessions_are_independent_and_listed_sorted(store: MemoryStore) -> None:
    store.append("b", batch("b1"))
    store.append("a", batch("a1"))
    store.append("b", batch("b2"))
    assert store.sessions() == ["a", "b"]
    assert store.load("a").sequence == 1
    assert texts(store.load("b").messages) == texts(batch("b1") + batch("b2"))


def test_a_batch_with_a_bad_item_stores_nothing(store: MemoryStore) -> None:
    store.append("s", batch("a"))
    bad: list[Any] = [*batch("b"), {"role": "user", "content": "a dict is not a Message"}]
    with pytest.raises(TypeError, match=r"messages\[3\]"):
        store.append("s", bad)
    assert store.load("s").sequence == 1
    assert texts(store.load("s").messages) == texts(batch("a"))


def test_replace_swaps_the_history_when_the_sequence_matches(store: MemoryStore) -> None:
    store.append("s", batch("a"))
    store.append("s", batch("b"))
    assert store.replace("s", batch("summary", 1), expected_sequence=2) == 3
    assert store.load("s") == expected(batch("summary", 1), 3)
    assert store.append("s", batch("c", 1)) == 4
    assert texts(store.load("s").messages) == ["summary/0", "c/0"]


def test_replace_with_a_stale_sequence_raises_and_changes_nothing(store: MemoryStore) -> None:
    store.append("s", batch("a"))
    stale = store.load("s").sequence
    store.append("s", batch("b"))
    before = store.load("s")
    with pytest.raises(ConcurrentModification) as caught:
        store.replace("s", [], expected_sequence=stale)
    assert (caught.value.session, caught.value.expected, caught.value.actual) == ("s", 1, 2)
    assert isinstance(caught.value, AgentRuntimeError)
    assert "'s'" in str(caught.value) and "1" in str(caught.value)
    assert store.load("s") == before


def test_replace_can_create_a_session_at_sequence_zero(store: MemoryStore) -> None:
    assert store.replace("new", batch("x", 1), 0) == 1
    assert store.sessions() == ["new"]
    with pytest.raises(ConcurrentModification):
        store.replace("other", [], 5)


def test_replace_with_nothing_keeps_the_session_listed(store: MemoryStore) -> None:
    store.append("s", batch("a"))
    store.replace("s", [], 1)
    assert store.sessions() == ["s"]
    assert store.load("s") == expected([], 2)


def test_delete_forgets_the_messages_but_never_lowers_the_sequence(store: MemoryStore) -> None:
    store.append("s", batch("a"))
    store.append("keep", batch("k"))
    assert store.delete("s") == 2
    assert store.sessions() == ["keep"]
    assert store.load("s") == expected([], 2)
    with pytest.raises(ConcurrentModification):
        store.replace("s", batch("from before the delete"), 1)
    assert store.append("s", batch("again", 1)) == 3
    assert store.load("s").messages == batch("again", 1)
    assert store.sessions() == ["keep", "s"]


def test_delete_of_an_absent_or_deleted_session_is_a_no_op(store: MemoryStore) -> None:
    assert store.delete("nobody") is None
    store.append("s", batch("a"))
    store.delete("s")
    assert store.delete("s") is None
    assert store.load("s").sequence == 2


def test_the_size_in_bytes_follows_every_change(store: MemoryStore) -> None:
    a, b, summary = batch("a"), batch("bé", 2), batch("summary", 1)
    store.append("s", a)
    assert store.load("s") == expected(a, 1)
    store.append("s", b)
    store.append("s", [])
    assert store.load("s") == expected(a + b, 2)
    store.replace("s", summary, 2)
    assert store.load("s") == expected(summary, 3)
    store.delete("s")
    assert store.load("s") == expected([], 4)
    store.append("s", b)
    assert store.load("s") == expected(b, 5)
    store.replace("s", [], 5)
    assert store.load("s").bytes == 0


def test_the_size_counts_utf8_bytes_of_each_messages_json(store: MemoryStore) -> None:
    message = UserMessage(content="€ and 😀", timestamp=0.0)
    store.append("s", [message])
    assert store.load("s").bytes == len(message.model_dump_json().encode())
    assert store.load("s").bytes > len(message.model_dump_json())


def test_a_loaded_list_is_a_copy(store: MemoryStore) -> None:
    store.append("s", batch("a"))
    store.load("s").messages.clear()
    assert len(store.load("s").messages) == 3


@pytest.mark.parametrize(
    ("session", "error"), [(5, TypeError), (None, TypeError), (b"s", TypeError), ("", ValueError)]
)
def test_a_session_must_be_a_non_empty_str(store: MemoryStore, session: Any, error: type) -> None:
    for call in (
        lambda: store.load(session),
        lambda: store.append(session, batch("a")),
        lambda: store.replace(session, [], 0),
        lambda: store.delete(session),
    ):
        with pytest.raises(error, match="session"):
            call()


@pytest.mark.parametrize("messages", ["text", b"bytes", {"role": "user"}, 42, None])
def test_messages_must_be_an_iterable_of_messages(store: MemoryStore, messages: Any) -> None:
    with pytest.raises(TypeError, match="messages"):
        store.append("s", messages)
    with pytest.raises(TypeError, match="messages"):
        store.replace("s", messages, 0)
    assert store.sessions() == []


@pytest.mark.parametrize(
    ("expected", "error"), [(-1, ValueError), (True, TypeError), ("0", TypeError)]
)
def test_expected_sequence_must_be_an_int_at_least_zero(
    store: MemoryStore, expected: Any, error: type
) -> None:
    with pytest.raises(error, match="expected_sequence"):
        store.replace("s", [], expected)


def test_a_closed_store_refuses_every_call_and_closes_again(store: MemoryStore) -> None:
    store.append("s", batch("a"))
    store.close()
    store.close()
    for call in (
        lambda: store.load("s"),
        lambda: store.append("s", batch("b")),
        lambda: store.replace("s", [], 1),
        lambda: store.sessions(),
        lambda: store.delete("s"),
        lambda: store.changes("s", 0),
        lambda: store.state_get("s", "k"),
        lambda: store.state_put("s", "k", "1"),
        lambda: store.state_delete("s", "k"),
        lambda: store.state_items("s"),
    ):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_concurrent_appends_store_every_batch_once_whole_and_in_sequence_order(
    store: MemoryStore,
) -> None:
    threads, batches, size = 8, 50, 3
    start = threading.Barrier(threads)
    returned: dict[int, list[int]] = {}

    def writer(t: int) -> None:
        start.wait(timeout=5)
        returned[t] = [store.append("s", batch(f"{t}:{b}", size)) for b in range(batches)]

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=30)
    assert not any(w.is_alive() for w in workers)

    for sequences in returned.values():
        assert sequences == sorted(set(sequences)), "sequences of one writer strictly increase"
    all_sequences = sorted(s for seqs in returned.values() for s in seqs)
    assert all_sequences == list(range(1, threads * batches + 1))

    history = store.load("s")
    assert history.sequence == threads * batches
    stored = texts(history.messages)
    assert len(stored) == threads * batches * size
    # Position of each batch = its sequence - 1: whole, once, in commit order.
    for t, sequences in returned.items():
        for b, sequence in enumerate(sequences):
            at = (sequence - 1) * size
            assert stored[at : at + size] == [f"{t}:{b}/{i}" for i in range(size)]


def test_a_compaction_racing_appends_never_loses_an_append(store: MemoryStore) -> None:
    # The compactor rewrites the history it read; without the sequence check, a rewrite based
    # on a stale read would silently drop the appends committed after that read.
    rounds = 100
    start = threading.Barrier(2)

    def appender() -> None:
        start.wait(timeout=5)
        for n in range(rounds):
            store.append("s", batch(f"w{n}", 1))

    def compactor() -> None:
        start.wait(timeout=5)
        for _ in range(rounds):
            history = store.load("s")
            with contextlib.suppress(ConcurrentModification):
                store.replace("s", history.messages, history.sequence)

    workers = [threading.Thread(target=appender), threading.Thread(target=compactor)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=30)
    assert texts(store.load("s").messages) == [f"w{n}/0" for n in range(rounds)]


def test_every_message_type_and_content_block_round_trips(store: MemoryStore) -> None:
    call = ToolCall(id="c1", name="read", arguments={"path": "é/ü", "n": [1, 2.5, None]})
    partial = ToolCall(id="c2", name="f", arguments={}, raw_arguments='{"a": ')
    original: list[Message] = [
        UserMessage(content="plain"),
        UserMessage(content=[TextContent(text="look"), ImageContent(data="aGk=", mime_type="x")]),
        AssistantMessage(
            content=[ThinkingContent(thinking="hm", signature="sig", redacted=True), call, partial],
            stop_reason="tool_use",
            usage=Usage(input_tokens=3, output_tokens=2, cached_input_tokens=1),
            model="m",
            provider="p",
        ),
        ToolResultMessage(
            tool_call_id="c1",
            tool_name="read",
            content=[TextContent(text="body")],
            details={"bytes": 4},
            is_error=True,
            trust="untrusted",
        ),
        AssistantMessage(content=[], stop_reason="error", error_message="boom"),
    ]
    store.append("s", original)
    loaded = store.load("s").messages
    assert loaded == original
    assert [type(m) for m in loaded] == [type(m) for m in original]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches=st.lists(st.lists(any_message, max_size=4), min_size=1, max_size=3))
def test_any_messages_come_back_equal(store: MemoryStore, batches: list[list[Message]]) -> None:
    session = f"s{next(_sessions)}"
    for messages in batches:
        store.append(session, messages)
    wanted = [m for messages in batches for m in messages]
    history = store.load(session)
    assert history.messages == wanted
    assert [m.model_dump_json() for m in history.messages] == [m.model_dump_json() for m in wanted]
    assert history.bytes == sum(len(m.model_dump_json().encode()) for m in wanted)
