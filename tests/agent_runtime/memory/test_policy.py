"""MemoryPolicy (what an agent reads and writes) and `window` (the last-n view that never cuts a
tool call from its results)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from agent_runtime.loop import validate_transcript
from agent_runtime.memory import MemoryPolicy, message_bytes, window
from agent_runtime.messages import Message, ToolResultMessage
from tests.agent_runtime.transcript_strategies import (
    assistant,
    call,
    result,
    user,
    valid_transcripts,
)


def test_the_default_reads_and_writes_everything() -> None:
    assert MemoryPolicy() == MemoryPolicy(read=True, write=True, last_n=None)


@pytest.mark.parametrize(
    ("policy", "fields"),
    [
        (MemoryPolicy.none(), (False, False, None)),
        (MemoryPolicy.read_only(), (True, False, None)),
        (MemoryPolicy.write_only(), (False, True, None)),
        (MemoryPolicy.limited_window(20), (True, True, 20)),
    ],
)
def test_named_policies(policy: MemoryPolicy, fields: tuple[bool, bool, int | None]) -> None:
    assert (policy.read, policy.write, policy.last_n) == fields
    assert MemoryPolicy.model_validate_json(policy.model_dump_json()) == policy


@pytest.mark.parametrize("n", [0, -1, True, 1.5, "3", None])
def test_a_window_needs_at_least_one_message(n: Any) -> None:
    with pytest.raises(ValueError, match="last_n"):
        MemoryPolicy.limited_window(n)


def test_last_n_is_validated_and_the_policy_is_frozen() -> None:
    with pytest.raises(ValidationError, match="last_n"):
        MemoryPolicy(last_n=0)
    for not_an_int in (True, "5", 5.0):  # the docstring's promise: an int >= 1, nothing else
        with pytest.raises(ValidationError, match="last_n"):
            MemoryPolicy(last_n=not_an_int)  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="max_bytes"):
            MemoryPolicy(max_bytes=not_an_int)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="unknown"):
        MemoryPolicy(unknown=True)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        MemoryPolicy().read = False  # type: ignore[misc]


def test_no_window_keeps_every_message() -> None:
    messages: list[Message] = [user("a"), assistant("b")]
    assert window(messages, None) == messages
    assert window(messages, None) is not messages


def test_a_window_keeps_the_newest_messages() -> None:
    messages: list[Message] = [user("1"), assistant("2"), user("3"), assistant("4")]
    assert window(messages, 2) == messages[2:]
    assert window(messages, 10) == messages


def test_a_window_drops_results_whose_call_was_cut_off() -> None:
    messages: list[Message] = [
        user("q"),
        assistant("", call("c1"), call("c2")),
        result("c1"),
        user("meanwhile"),
        result("c2"),
        assistant("done"),
    ]
    assert window(messages, 4) == [user("meanwhile"), assistant("done")]
    assert window(messages, 5) == messages[1:]


def test_a_window_keeps_a_call_still_waiting_for_its_results() -> None:
    messages: list[Message] = [user("q"), assistant("", call("c1"))]
    assert window(messages, 1) == messages[1:]


def test_a_bad_window_size_is_named() -> None:
    with pytest.raises(ValueError, match="last_n"):
        window([], 0)


@given(messages=valid_transcripts(), last_n=st.integers(min_value=1, max_value=30))
def test_a_window_of_a_valid_transcript_is_a_valid_suffix(
    messages: list[Message], last_n: int
) -> None:
    kept = window(messages, last_n)
    suffix = messages[-last_n:]
    assert len(kept) <= last_n
    assert validate_transcript(kept) == []
    it = iter(suffix)
    assert all(any(m is s for s in it) for m in kept), "a subsequence of the suffix, in order"
    dropped = [m for m in suffix if not any(m is k for k in kept)]
    assert all(isinstance(m, ToolResultMessage) for m in dropped), "only orphaned results go"


@given(
    messages=valid_transcripts(),
    last_n=st.one_of(st.none(), st.integers(min_value=1, max_value=30)),
    max_bytes=st.integers(min_value=1, max_value=4000),
)
def test_a_byte_window_is_whole_units_within_both_bounds(
    messages: list[Message], last_n: int | None, max_bytes: int
) -> None:
    kept = window(messages, last_n, max_bytes)
    assert message_bytes(kept) <= max_bytes
    assert last_n is None or len(kept) <= last_n
    assert validate_transcript(kept) == []
    counted = window(messages, last_n)
    # a subsequence of the count window's newest part, missing only orphaned results
    first = next((i for i, m in enumerate(counted) if kept and m is kept[0]), len(counted))
    newest = counted[first:]
    it = iter(newest)
    assert all(any(m is n for n in it) for m in kept), "in order"
    missing = [m for m in newest if not any(m is k for k in kept)]
    assert all(isinstance(m, ToolResultMessage) for m in missing)
    # and no older unit would have fitted as well
    if first > 0:
        start = first - 1
        while start > 0 and isinstance(counted[start], ToolResultMessage):
            start -= 1
        assert message_bytes(counted[start:]) > max_bytes


def test_limited_window_takes_a_count_a_size_or_both() -> None:
    assert MemoryPolicy.limited_window(5).last_n == 5
    by_size = MemoryPolicy.limited_window(max_bytes=156 * 1024)
    assert (by_size.last_n, by_size.max_bytes, by_size.read, by_size.write) == (
        None,
        156 * 1024,
        True,
        True,
    )
    assert MemoryPolicy.model_validate_json(by_size.model_dump_json()) == by_size
    with pytest.raises(ValueError, match="max_bytes"):
        MemoryPolicy.limited_window(max_bytes=0)
    with pytest.raises(ValueError, match="max_bytes"):
        window([], None, -5)
