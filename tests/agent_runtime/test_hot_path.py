"""What the hot path's shortcuts must keep: incremental checks, deferred snapshots."""

from __future__ import annotations

import threading

from hypothesis import given
from hypothesis import strategies as st

from agent_runtime.events import EventAdapter, MessageDelta, MessageUpdate
from agent_runtime.loop import TranscriptState, validate_transcript
from agent_runtime.messages import AssistantMessage, ImageContent, Message, TextContent, UserMessage
from tests.agent_runtime.transcript_strategies import (
    assistant,
    call,
    result,
    user,
    valid_transcripts,
)

pieces = st.sampled_from(
    [
        user(),
        assistant("a"),
        assistant("", call("c1")),
        assistant("", call("c2"), call("c3")),
        result("c1"),
        result("c2"),
        result("c3"),
        result("zz"),
    ]
)


@given(st.lists(pieces, max_size=12), st.lists(st.integers(0, 12), max_size=4))
def test_a_transcript_fed_in_pieces_says_what_validate_transcript_says(
    messages: list[Message], cuts: list[int]
) -> None:
    state = TranscriptState()
    start = 0
    for cut in [*sorted({min(c, len(messages)) for c in cuts}), len(messages)]:
        state.feed(messages[start:cut])
        assert state.violations() == validate_transcript(messages[:cut])
        start = cut
    assert state.count == len(messages)


@given(valid_transcripts())
def test_a_copy_goes_on_alone(messages: list[Message]) -> None:
    state = TranscriptState()
    state.feed(messages)
    copy = state.copy()
    copy.feed([result("orphan")])
    assert state.violations() == [] and copy.violations() != []


def test_the_state_knows_when_an_image_was_fed() -> None:
    state = TranscriptState()
    state.feed([user("hi")])
    assert not state.vision
    state.feed([UserMessage(content=[ImageContent(data="aGk=", mime_type="image/png")])])
    assert state.vision


def _message(text: str) -> AssistantMessage:
    return AssistantMessage(content=[TextContent(text=text)], stop_reason="stop")


DELTA = MessageDelta(kind="text", content_index=0, delta="o")


def test_a_deferred_update_makes_its_message_once_and_only_when_read() -> None:
    calls: list[int] = []

    def snapshot() -> AssistantMessage:
        calls.append(1)
        return _message("hello")

    event = MessageUpdate.deferred(snapshot, DELTA, run_id="r", seq=4)
    assert calls == [] and event.delta == DELTA and event.seq == 4
    seen: list[AssistantMessage] = []
    readers = [threading.Thread(target=lambda: seen.append(event.message)) for _ in range(8)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(5)
    assert calls == [1] and len({id(m) for m in seen}) == 1 and seen[0].text == "hello"


def test_a_deferred_update_is_an_ordinary_event_to_json_and_equality() -> None:
    message = _message("hel")
    event = MessageUpdate.deferred(lambda: message, DELTA, run_id="r", seq=2)
    plain = MessageUpdate(message=message, delta=DELTA, run_id="r", seq=2, ts=event.ts)
    assert event.model_dump_json() == plain.model_dump_json()
    assert EventAdapter.validate_json(event.model_dump_json()) == event == plain
    assert event.model_copy(update={"seq": 3}).message.text == "hel"
    assert "hel" in repr(MessageUpdate.deferred(lambda: _message("hel"), DELTA))
