"""ChatResponseBuilder: fragment grouping, argument parsing, usage, truncation, missing terminal."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_runtime.llm import (
    ChatResponseBuilder,
    FinishDelta,
    NetworkError,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    UsageDelta,
)
from agent_runtime.llm.types import StreamChunk
from agent_runtime.messages import TextContent, ThinkingContent, ToolCall, Usage


def build(chunks: list[StreamChunk]) -> ChatResponseBuilder:
    builder = ChatResponseBuilder(model="m", provider="p")
    for chunk in chunks:
        builder.add(chunk)
    return builder


def test_text_fragments_join_into_one_block() -> None:
    response = build([TextDelta(text="Hel"), TextDelta(text="lo"), FinishDelta(reason="stop")])
    assert response.build().message.content == [TextContent(text="Hello")]


def test_interleaved_indexes_group_by_index_and_keep_first_id_and_name() -> None:
    chunks: list[StreamChunk] = [
        ToolCallDelta(index=0, id="a", name="read", arguments='{"pa'),
        ToolCallDelta(index=1, id="b", name="write", arguments='{"x"'),
        ToolCallDelta(index=0, id="a", name="read", arguments='th": "f"}'),
        ToolCallDelta(index=1, arguments=": 1}"),
        FinishDelta(reason="tool_use"),
    ]
    calls = build(chunks).build().message.tool_calls
    assert calls == [
        ToolCall(id="a", name="read", arguments={"path": "f"}),
        ToolCall(id="b", name="write", arguments={"x": 1}),
    ]


def test_missing_index_groups_by_id_then_continues_the_last_call() -> None:
    chunks: list[StreamChunk] = [
        ToolCallDelta(id="a", name="f", arguments='{"k":'),
        ToolCallDelta(arguments=' "v"}'),
        ToolCallDelta(id="b", name="g", arguments=""),
        FinishDelta(reason="tool_use"),
    ]
    calls = build(chunks).build().message.tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [("a", "f", {"k": "v"}), ("b", "g", {})]


def test_one_index_reused_for_different_ids_makes_separate_calls() -> None:
    chunks: list[StreamChunk] = [
        ToolCallDelta(index=0, id="a", name="f", arguments="{}"),
        ToolCallDelta(index=0, id="b", name="g", arguments="{}"),
        FinishDelta(reason="tool_use"),
    ]
    assert [c.id for c in build(chunks).build().message.tool_calls] == ["a", "b"]


def test_calls_of_different_indexes_stay_apart_with_an_empty_or_a_shared_id() -> None:
    for shared in ("", "call_0"):
        chunks: list[StreamChunk] = [
            ToolCallDelta(index=0, id=shared, name="f", arguments='{"n": 1}'),
            ToolCallDelta(index=1, id=shared, name="f", arguments='{"n": 2}'),
            FinishDelta(reason="tool_use"),
        ]
        calls = build(chunks).build().message.tool_calls
        assert [c.arguments for c in calls] == [{"n": 1}, {"n": 2}]


def test_a_call_that_began_without_an_index_is_continued_by_its_id() -> None:
    chunks: list[StreamChunk] = [
        ToolCallDelta(id="a", name="f", arguments='{"n":'),
        ToolCallDelta(index=0, id="a", arguments=" 1}"),
        FinishDelta(reason="tool_use"),
    ]
    assert [c.arguments for c in build(chunks).build().message.tool_calls] == [{"n": 1}]


def test_usage_is_replaced_not_summed() -> None:
    chunks: list[StreamChunk] = [
        UsageDelta(usage=Usage(input_tokens=10, output_tokens=1)),
        UsageDelta(usage=Usage(input_tokens=10, output_tokens=7)),
        FinishDelta(reason="stop"),
    ]
    assert build(chunks).build().usage == Usage(input_tokens=10, output_tokens=7)


def test_tool_use_decided_from_calls_not_from_finish_reason() -> None:
    with_call = build([ToolCallDelta(index=0, id="a", name="f"), FinishDelta(reason="stop")])
    assert with_call.build().stop_reason == "tool_use"
    without = build([TextDelta(text="hi"), FinishDelta(reason="tool_use")])
    assert without.build().stop_reason == "stop"


def test_truncated_stream_keeps_partial_text_and_raw_arguments() -> None:
    chunks: list[StreamChunk] = [
        TextDelta(text="Let me "),
        ToolCallDelta(index=0, id="a", name="f", arguments='{"path": "/tm'),
        FinishDelta(reason="length"),
    ]
    response = build(chunks).build()
    assert response.stop_reason == "length" and response.truncated
    assert response.message.text == "Let me "
    call = response.message.tool_calls[0]
    assert call.raw_arguments == '{"path": "/tm'
    with pytest.raises(Exception, match="max_output_tokens"):
        response.ensure_complete()


def test_a_call_cut_off_by_the_token_limit_gets_empty_arguments_and_its_raw_text() -> None:
    chunks: list[StreamChunk] = [
        ToolCallDelta(index=0, id="a", name="read", arguments='{"path": "/etc/hosts"}'),
        ToolCallDelta(index=1, id="b", name="read", arguments='{"path": "/etc/pass'),
        FinishDelta(reason="length"),
    ]
    builder = build(chunks)
    complete, cut = builder.build().message.tool_calls
    assert (complete.arguments, complete.raw_arguments) == ({"path": "/etc/hosts"}, None)
    assert (cut.arguments, cut.raw_arguments) == ({}, '{"path": "/etc/pass')
    # a progress snapshot still shows how far the arguments got
    assert builder.snapshot().tool_calls[1].arguments == {"path": "/etc/pass"}


def test_parallel_calls_are_ordered_by_the_provider_index_not_by_arrival() -> None:
    chunks: list[StreamChunk] = [
        TextDelta(text="Reading both."),
        ToolCallDelta(index=2, id="c", name="third", arguments="{}"),
        ToolCallDelta(index=0, id="a", name="first", arguments='{"n":'),
        ToolCallDelta(index=1, id="b", name="second", arguments="{}"),
        ToolCallDelta(index=0, arguments=" 1}"),
        FinishDelta(reason="tool_use"),
    ]
    builder = build(chunks)
    message = builder.build().message
    assert message.text == "Reading both."
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == [
        ("a", "first", {"n": 1}),
        ("b", "second", {}),
        ("c", "third", {}),
    ]
    assert builder.snapshot().content == message.content  # progress shows the same order


def test_invalid_json_arguments_are_kept_raw_with_empty_arguments() -> None:
    response = build(
        [
            ToolCallDelta(index=0, id="a", name="f", arguments="{not json"),
            FinishDelta(reason="stop"),
        ]
    ).build()
    assert response.message.tool_calls[0].arguments == {}
    assert response.message.tool_calls[0].raw_arguments == "{not json"


@pytest.mark.parametrize("encoded", ["a JSON string holding an object", "in two fragments"])
def test_double_encoded_arguments_are_the_object_they_hold(encoded: str) -> None:
    # Some servers send the arguments as a JSON string of the object's JSON: the call's
    # `arguments` are that object, so guardrails and approvers check what the tool runs with.
    text = json.dumps(json.dumps({"path": "/etc/passwd"}))
    parts = [text] if encoded.startswith("a JSON") else [text[:9], text[9:]]
    deltas: list[StreamChunk] = [
        ToolCallDelta(
            index=0, id="a" if i == 0 else None, name="rm" if i == 0 else None, arguments=part
        )
        for i, part in enumerate(parts)
    ]
    response = build([*deltas, FinishDelta(reason="tool_use")]).build()
    call = response.message.tool_calls[0]
    assert (call.arguments, call.raw_arguments) == ({"path": "/etc/passwd"}, None)


def test_a_json_string_that_holds_no_object_is_kept_raw() -> None:
    text = json.dumps("just words")
    response = build(
        [ToolCallDelta(index=0, id="a", name="f", arguments=text), FinishDelta(reason="stop")]
    ).build()
    call = response.message.tool_calls[0]
    assert (call.arguments, call.raw_arguments) == ({}, text)


def test_stream_without_terminal_marker_raises_network_error() -> None:
    builder = build([TextDelta(text="partial")])
    with pytest.raises(NetworkError, match="terminal marker"):
        builder.build()
    assert builder.build(allow_unfinished=True).message.text == "partial"


def test_thinking_blocks_keep_their_signature_and_order() -> None:
    chunks: list[StreamChunk] = [
        ThinkingDelta(text="hmm "),
        ThinkingDelta(text="ok"),
        ThinkingDelta(signature="sig1"),
        TextDelta(text="answer"),
        FinishDelta(reason="stop"),
    ]
    assert build(chunks).build().message.content == [
        ThinkingContent(thinking="hmm ok", signature="sig1"),
        TextContent(text="answer"),
    ]


def _splits(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces, last = [], 0
    for point in points:
        pieces.append(text[last:point])
        last = point
    pieces.append(text[last:])
    return pieces


@settings(max_examples=100, deadline=None)
@given(
    text=st.text(min_size=0, max_size=40),
    args=st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=8), max_size=4),
    text_cuts=st.lists(st.integers(0, 1000), max_size=6),
    arg_cuts=st.lists(st.integers(0, 1000), max_size=6),
    interleave=st.booleans(),
)
def test_any_split_of_a_stream_assembles_to_the_same_response(
    text: str, args: dict[str, object], text_cuts: list[int], arg_cuts: list[int], interleave: bool
) -> None:
    raw = json.dumps(args)
    whole: list[StreamChunk] = [
        TextDelta(text=text),
        ToolCallDelta(index=0, id="c1", name="tool", arguments=raw),
        ToolCallDelta(index=1, id="c2", name="other", arguments=raw),
        UsageDelta(usage=Usage(input_tokens=3, output_tokens=4)),
        FinishDelta(reason="tool_use"),
    ]
    text_parts: list[StreamChunk] = [TextDelta(text=p) for p in _splits(text, text_cuts)]
    first = [ToolCallDelta(index=0, arguments=p) for p in _splits(raw, arg_cuts)]
    second = [ToolCallDelta(index=1, arguments=p) for p in _splits(raw, arg_cuts)]
    calls: list[StreamChunk] = [ToolCallDelta(index=0, id="c1", name="tool")]
    calls.append(ToolCallDelta(index=1, id="c2", name="other"))
    if interleave:
        for a, b in zip(first, second, strict=True):
            calls.extend([a, b])
    else:
        calls.extend(first + second)
    split = [*text_parts, *calls, UsageDelta(usage=Usage(input_tokens=3, output_tokens=4))]
    split.append(FinishDelta(reason="tool_use"))
    expected = build(whole).build()
    actual = build(split).build()
    assert actual.message.content == expected.message.content
    assert (actual.stop_reason, actual.usage) == (expected.stop_reason, expected.usage)


def test_a_deferred_snapshot_is_the_snapshot_as_it_was_when_taken() -> None:
    builder = build(
        [
            ThinkingDelta(text="hm", signature="s1"),
            TextDelta(text="Hel"),
            ToolCallDelta(index=1, id="b", name="write", arguments='{"x": "par'),
            UsageDelta(usage=Usage(input_tokens=3, output_tokens=2)),
        ]
    )
    then = builder.snapshot()
    deferred = builder.deferred_snapshot()
    builder.add(TextDelta(text="lo"))
    builder.add(ToolCallDelta(index=1, arguments='tial"}'))

    made = deferred()

    assert made.model_dump(exclude={"timestamp"}) == then.model_dump(exclude={"timestamp"})
    assert made.model_fields_set == then.model_fields_set  # exclude_unset dumps agree too


@settings(max_examples=80, deadline=None)
@given(
    pieces=st.lists(
        st.tuples(st.sampled_from(["text", "thinking", "call"]), st.text(max_size=4)),
        min_size=1,
        max_size=25,
    ),
    order=st.randoms(use_true_random=False),
)
def test_deferred_snapshots_made_in_any_order_are_each_the_answer_as_it_was(
    pieces: list[tuple[str, str]], order: object
) -> None:
    # A snapshot joins only the parts added since the last one made: made out of order,
    # again, or after later ones, each is still the answer at the point it was taken.
    builder = ChatResponseBuilder()
    taken = []
    for kind, piece in pieces:
        if kind == "text":
            builder.add(TextDelta(text=piece))
        elif kind == "thinking":
            builder.add(ThinkingDelta(text=piece))
        else:
            builder.add(ToolCallDelta(index=0, id="c", name="f", arguments=piece))
        taken.append((builder.snapshot(), builder.deferred_snapshot()))
    shuffled = taken * 2
    order.shuffle(shuffled)  # type: ignore[attr-defined]
    for then, deferred in shuffled:
        made = deferred()
        assert made.model_dump(exclude={"timestamp"}) == then.model_dump(exclude={"timestamp"})
    final = builder.snapshot()
    assert final.content == taken[-1][0].content


def test_a_deferred_call_snapshot_ignores_what_the_call_gets_while_it_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Made on a reader's thread while the producer streams on: a fragment (or an id) that
    # arrives during the making must not leak into the snapshot marked before it.
    from agent_runtime.llm import builder as builder_module

    made_by = builder_module._finish_call
    builder = ChatResponseBuilder()
    builder.add(ToolCallDelta(index=0, arguments='{"a": 1'))
    deferred = builder.deferred_snapshot()

    def producer_runs_meanwhile(call: Any, number: int, *, partial: bool) -> ToolCall:
        live = builder._blocks[0]
        assert isinstance(live, builder_module._Call)
        live.parts.append(', "late": 2}')
        live.id, live.name = live.id or "late-id", live.name or "late-name"
        return made_by(call, number, partial=partial)

    monkeypatch.setattr(builder_module, "_finish_call", producer_runs_meanwhile)
    (call,) = deferred().content
    assert isinstance(call, ToolCall)
    assert (call.id, call.name, call.arguments) == ("call_0", "", {"a": 1})
