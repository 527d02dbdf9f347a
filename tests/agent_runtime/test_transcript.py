"""validate_transcript: each kind of pairing violation is found; valid transcripts pass."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_runtime.loop._transcript import validate_transcript
from agent_runtime.messages import AssistantMessage, Message, ToolResultMessage
from tests.agent_runtime.transcript_strategies import (
    assistant,
    call,
    result,
    user,
    valid_transcripts,
)


def kinds(violations: list[str]) -> set[str]:
    return {v.split(":", 1)[0] for v in violations}


def result_positions(messages: list[Message]) -> list[int]:
    return [i for i, m in enumerate(messages) if isinstance(m, ToolResultMessage)]


@given(valid_transcripts())
def test_a_valid_transcript_has_no_violations(messages: list[Message]) -> None:
    assert validate_transcript(messages) == []


def test_empty_and_plain_transcripts_are_valid() -> None:
    assert validate_transcript([]) == []
    assert validate_transcript([user(), assistant("hello"), user("again")]) == []


def test_a_call_without_result_before_the_next_assistant_message_is_unpaired() -> None:
    messages: list[Message] = [user(), assistant("", call("c1"), call("c2")), result("c1")]
    messages.append(assistant("done"))
    [violation] = validate_transcript(messages)
    assert violation.startswith("unpaired tool call: 'c2' (echo) in message 1")
    assert "message 3" in violation


def test_a_call_left_open_at_the_end_is_unpaired() -> None:
    [violation] = validate_transcript([user(), assistant("", call("c1"))])
    assert violation.startswith("unpaired tool call: 'c1'")
    assert "the end" in violation


def test_a_second_result_for_one_call_is_a_duplicate_result() -> None:
    messages: list[Message] = [user(), assistant("", call("c1")), result("c1"), result("c1")]
    assert validate_transcript(messages) == [
        "duplicate tool result: message 3 is a second result for tool call 'c1' "
        "(the first is message 2)"
    ]


def test_a_result_for_an_unknown_call_is_an_orphan() -> None:
    messages: list[Message] = [user(), assistant("", call("c1")), result("c1"), result("zz")]
    [violation] = validate_transcript(messages)
    assert violation.startswith("orphan tool result: message 3 answers tool call 'zz'")


def test_a_result_before_any_assistant_message_is_an_orphan() -> None:
    [violation] = validate_transcript([result("c1"), user()])
    assert "no assistant message before it" in violation


def test_a_late_result_for_an_older_call_is_an_orphan_and_the_call_unpaired() -> None:
    messages: list[Message] = [user(), assistant("", call("c1")), assistant("next"), result("c1")]
    assert kinds(validate_transcript(messages)) == {"unpaired tool call", "orphan tool result"}


def test_a_reused_call_id_is_a_duplicate_id() -> None:
    messages: list[Message] = [user(), assistant("", call("c1")), result("c1")]
    messages += [assistant("", call("c1")), result("c1")]
    assert validate_transcript(messages) == [
        "duplicate tool-call id: 'c1' (echo) in message 3 was already used in message 1"
    ]


def test_a_user_message_between_a_call_and_its_result_is_allowed() -> None:
    messages: list[Message] = [user(), assistant("", call("c1")), user("steer"), result("c1")]
    assert validate_transcript(messages) == []


@given(valid_transcripts(), st.data())
def test_dropping_a_result_is_found_as_unpaired(
    messages: list[Message], data: st.DataObject
) -> None:
    positions = result_positions(messages)
    if not positions:
        return
    del messages[data.draw(st.sampled_from(positions))]
    assert "unpaired tool call" in kinds(validate_transcript(messages))


@given(valid_transcripts(), st.data())
def test_repeating_a_result_is_found_as_duplicate(
    messages: list[Message], data: st.DataObject
) -> None:
    positions = result_positions(messages)
    if not positions:
        return
    at = data.draw(st.sampled_from(positions))
    messages.insert(at + 1, messages[at])
    assert "duplicate tool result" in kinds(validate_transcript(messages))


@given(valid_transcripts(), st.data())
def test_a_result_for_a_call_that_does_not_exist_is_found_as_orphan(
    messages: list[Message], data: st.DataObject
) -> None:
    at = data.draw(st.integers(0, len(messages)))
    messages.insert(at, result("nobody"))
    assert "orphan tool result" in kinds(validate_transcript(messages))


@given(valid_transcripts(), st.data())
def test_reusing_an_earlier_call_id_is_found_as_duplicate_id(
    messages: list[Message], data: st.DataObject
) -> None:
    ids = [c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    if not ids:
        return
    reused = data.draw(st.sampled_from(ids))
    messages += [assistant("", call(reused)), result(reused)]
    assert kinds(validate_transcript(messages)) == {"duplicate tool-call id"}
