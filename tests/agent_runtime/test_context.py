"""Context estimation and truncation: sizes, stats, units kept whole, limits, invariants."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_runtime.context import (
    IMAGE_CHARS,
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    ContextStats,
    check_size,
    estimate_size,
    estimate_tokens,
    make_transform,
    message_size,
    stats,
    truncate,
)
from agent_runtime.loop._transcript import validate_transcript
from agent_runtime.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserMessage,
)
from tests.agent_runtime.transcript_strategies import (
    assistant,
    call,
    result,
    user,
    valid_transcripts,
)

# --- estimation ----------------------------------------------------------------------------------


def test_size_counts_text_thinking_tool_call_arguments_and_results() -> None:
    tool_call = ToolCall(id="c1", name="read", arguments={"path": "a.txt"})
    thinking = ThinkingContent(thinking="hmm", signature="not-counted")
    messages: list[Message] = [
        user("hello"),
        AssistantMessage(content=[thinking, TextContent(text="ok"), tool_call]),
        result("c1", "file body"),
    ]
    arguments = json.dumps({"path": "a.txt"})
    assert estimate_size(messages) == 5 + 3 + 2 + len("read") + len(arguments) + 9
    assert estimate_size(messages, system_prompt="be brief") == estimate_size(messages) + 8


def test_unparsed_tool_call_arguments_count_as_streamed() -> None:
    broken = ToolCall(id="c1", name="f", arguments={}, raw_arguments='{"a": ')
    assert message_size(AssistantMessage(content=[broken])) == 1 + len('{"a": ')


def test_an_image_costs_a_fixed_amount() -> None:
    image = ImageContent(data="x" * 100_000, mime_type="image/png")
    message = UserMessage(content=[image])
    assert message_size(message) == IMAGE_CHARS
    assert estimate_tokens([message]) == IMAGE_TOKENS + MESSAGE_OVERHEAD_TOKENS


def test_tokens_are_a_quarter_of_the_characters_rounded_up_plus_framing() -> None:
    assert estimate_tokens([user("x" * 9)]) == 3 + MESSAGE_OVERHEAD_TOKENS
    assert estimate_tokens([]) == 0


def test_stats_count_roles_calls_results_and_images() -> None:
    image = ImageContent(data="aGk=", mime_type="image/png")
    messages: list[Message] = [
        UserMessage(content=[TextContent(text="look"), image]),
        assistant("", call("c1"), call("c2")),
        result("c1"),
        result("c2"),
        assistant("done"),
    ]
    assert stats(messages) == ContextStats(
        message_count=5,
        chars=estimate_size(messages),
        tokens=estimate_tokens(messages),
        by_role={"user": 1, "assistant": 2, "tool_result": 2},
        tool_calls=2,
        tool_results=2,
        images=1,
    )


def test_check_size_says_whether_the_estimate_fits() -> None:
    messages = [user("x" * 400)]
    tokens = estimate_tokens(messages)
    assert check_size(messages, tokens)
    assert not check_size(messages, tokens - 1)
    assert not check_size(messages, tokens, system_prompt="more")


def test_check_size_rejects_a_negative_limit() -> None:
    with pytest.raises(ValueError, match="max_tokens -1"):
        check_size([], -1)


# --- truncation: examples ------------------------------------------------------------------------


def conversation(turns: int) -> list[Message]:
    """The task, then `turns` tool turns (assistant + one result) and a final answer."""
    messages: list[Message] = [user("task")]
    for n in range(turns):
        messages += [assistant("", call(f"c{n}")), result(f"c{n}")]
    return [*messages, assistant("done")]


def test_a_transcript_within_the_limits_is_kept_whole() -> None:
    messages = conversation(3)
    assert truncate(messages, max_messages=len(messages)) == (messages, [])
    assert truncate(messages) == (messages, [])


def test_sliding_window_keeps_the_task_and_the_newest_units() -> None:
    messages = conversation(3)  # task, a0, r0, a1, r1, a2, r2, done
    kept, dropped = truncate(messages, max_messages=4)
    assert kept == [messages[0], messages[5], messages[6], messages[7]]
    assert dropped == messages[1:5]


def test_sliding_window_without_keep_first_user_may_drop_the_task() -> None:
    messages = conversation(3)
    kept, _ = truncate(messages, max_messages=3, keep_first_user=False)
    assert kept == messages[5:]


def test_a_tool_turn_is_never_split() -> None:
    messages: list[Message] = [user("task"), assistant("", call("a"), call("b"))]
    messages += [result("a"), result("b"), user("next"), assistant("fine")]
    kept, _ = truncate(messages, max_messages=4)
    assert kept == [messages[0], messages[4], messages[5]]
    assert validate_transcript(kept) == []


def test_max_chars_limits_the_kept_characters() -> None:
    messages: list[Message] = [user("t"), assistant("a" * 50), user("b" * 50), assistant("c" * 10)]
    kept, dropped = truncate(messages, max_chars=70)
    assert kept == [messages[0], messages[2], messages[3]]
    assert dropped == [messages[1]]


def test_a_newest_unit_over_the_limits_is_dropped_so_the_result_fits() -> None:
    messages: list[Message] = [user("task"), assistant("old"), user("x" * 1000)]
    assert truncate(messages, max_chars=10, keep_first_user=False) == ([], messages)
    kept, dropped = truncate(messages, max_chars=10)
    assert (kept, dropped) == ([messages[0]], messages[1:])
    assert estimate_size(kept) <= 10


def test_the_result_never_exceeds_max_messages_even_for_a_tool_turn() -> None:
    messages: list[Message] = [user("task"), assistant("", call("a"), call("b"))]
    messages += [result("a"), result("b")]  # the newest unit holds three messages
    kept, _ = truncate(messages, max_messages=2, keep_first_user=False)
    assert kept == []
    kept, _ = truncate(messages, max_messages=2)
    assert kept == [messages[0]]


def test_the_first_user_message_is_the_only_thing_kept_over_the_limits() -> None:
    messages: list[Message] = [user("t" * 50), assistant("a"), user("b")]
    kept, dropped = truncate(messages, max_chars=10)
    assert (kept, dropped) == ([messages[0]], messages[1:])
    assert truncate(messages, max_messages=0) == ([messages[0]], messages[1:])


def test_estimate_size_takes_the_system_prompt_by_position_too() -> None:
    messages: list[Message] = [user("hello")]
    assert estimate_size(messages, "be brief") == 5 + 8
    assert estimate_size(messages, "be brief") == estimate_size(messages, system_prompt="be brief")
    assert estimate_tokens(messages, "be brief") == estimate_tokens(
        messages, system_prompt="be brief"
    )
    assert stats(messages, "be brief").chars == 13


def test_a_system_prompt_that_is_not_text_is_rejected_by_name() -> None:
    with pytest.raises(TypeError, match="system_prompt must be a str or None, not int"):
        estimate_size([user("hello")], 123)  # type: ignore[arg-type]


def test_keep_bookends_keeps_the_beginning_and_the_end() -> None:
    messages: list[Message] = [user(str(n)) if n % 2 == 0 else assistant(str(n)) for n in range(10)]
    kept, dropped = truncate(messages, max_messages=6, strategy="keep_bookends")
    assert kept == messages[:3] + messages[7:]
    assert dropped == messages[3:7]


def test_keep_bookends_never_splits_a_tool_turn() -> None:
    messages = conversation(4)  # task, a0, r0, a1, r1, a2, r2, a3, r3, done
    kept, _ = truncate(messages, max_messages=6, strategy="keep_bookends")
    assert kept == [messages[0], messages[1], messages[2], messages[7], messages[8], messages[9]]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"max_messages": -1}, "max_messages -1"),
        ({"max_chars": -5}, "max_chars -5"),
        ({"max_messages": 2.5}, "max_messages 2.5"),
        ({"max_messages": True}, "max_messages True"),
        ({"strategy": "summarize"}, "strategy 'summarize'"),
    ],
)
def test_bad_options_are_rejected_by_name(options: dict[str, object], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        truncate([user()], **options)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=named):
        make_transform(**options)  # type: ignore[arg-type]


def test_make_transform_truncates_without_changing_its_input() -> None:
    messages = conversation(3)
    original = list(messages)
    transform = make_transform(max_messages=4)
    assert transform(messages) == truncate(original, max_messages=4)[0]
    assert messages == original


# --- truncation: invariants ----------------------------------------------------------------------

limits = st.none() | st.integers(0, 12)
char_limits = st.none() | st.integers(0, 300)
strategies = st.sampled_from(["sliding_window", "keep_bookends"])


def assert_partition(messages: list[Message], kept: list[Message], dropped: list[Message]) -> None:
    k = d = 0
    for message in messages:
        if k < len(kept) and kept[k] is message:
            k += 1
        else:
            assert d < len(dropped) and dropped[d] is message
            d += 1
    assert (k, d) == (len(kept), len(dropped))


@given(valid_transcripts(), limits, char_limits, strategies, st.booleans())
def test_truncation_keeps_a_valid_transcript_valid_and_is_idempotent(
    messages: list[Message],
    max_messages: int | None,
    max_chars: int | None,
    strategy: str,
    keep_first_user: bool,
) -> None:
    options = {"max_messages": max_messages, "max_chars": max_chars, "strategy": strategy}
    kept, dropped = truncate(messages, keep_first_user=keep_first_user, **options)  # type: ignore[arg-type]
    assert validate_transcript(kept) == []
    assert_partition(messages, kept, dropped)
    again, dropped_again = truncate(kept, keep_first_user=keep_first_user, **options)  # type: ignore[arg-type]
    assert (again, dropped_again) == (kept, [])


@given(valid_transcripts(), limits, char_limits, strategies, st.booleans())
def test_truncation_respects_both_limits_but_for_the_pinned_task(
    messages: list[Message],
    max_messages: int | None,
    max_chars: int | None,
    strategy: str,
    keep_first_user: bool,
) -> None:
    kept, _ = truncate(messages, max_messages, max_chars, strategy, keep_first_user)  # type: ignore[arg-type]
    users = [m for m in messages if isinstance(m, UserMessage)]
    task = users[0] if keep_first_user and users else None
    if task is not None:
        assert any(m is task for m in kept)
    # Over a limit only when the task alone is: then it is all that is kept.
    only_the_task = task is not None and len(kept) == 1
    if max_messages is not None:
        assert len(kept) <= max_messages or only_the_task
    if max_chars is not None:
        assert estimate_size(kept) <= max_chars or only_the_task
