"""Message and content models: JSON round trips, discrimination, immutability and helpers."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from agent_runtime import Runtime
from agent_runtime.config import RuntimeConfig
from agent_runtime.messages import (
    AssistantMessage,
    ImageContent,
    MessageAdapter,
    MessageListAdapter,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from agent_runtime.testing import ScriptedModel, wait_until
from tests.agent_runtime import strategies as s

MODELS: dict[str, st.SearchStrategy[Any]] = {
    "text": s.text_content,
    "image": s.image_content,
    "thinking": s.thinking_content,
    "tool_call": s.tool_calls,
    "usage": s.usages,
    "user": s.user_messages,
    "assistant": s.assistant_messages,
    "tool_result_message": s.tool_result_messages,
    "tool_result": s.tool_results,
}


@pytest.mark.parametrize("name", MODELS)
@given(data=st.data())
def test_every_model_round_trips_through_json(name: str, data: st.DataObject) -> None:
    model: BaseModel = data.draw(MODELS[name])
    again = type(model).model_validate_json(model.model_dump_json())
    assert again == model
    assert type(again) is type(model)


@given(s.messages)
def test_message_adapter_restores_the_concrete_message_type(message: Any) -> None:
    parsed = MessageAdapter.validate_json(MessageAdapter.dump_json(message))
    assert parsed == message
    assert type(parsed) is type(message)


@given(st.lists(s.messages, max_size=5))
def test_a_transcript_round_trips_as_a_list(transcript: list[Any]) -> None:
    assert MessageListAdapter.validate_json(MessageListAdapter.dump_json(transcript)) == transcript


def test_messages_are_discriminated_by_role() -> None:
    parsed = MessageListAdapter.validate_python(
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_call", "id": "c1", "name": "ls"}]},
            {"role": "tool_result", "tool_call_id": "c1", "tool_name": "ls"},
        ]
    )
    assert [type(m) for m in parsed] == [UserMessage, AssistantMessage, ToolResultMessage]


def test_content_blocks_are_discriminated_by_type() -> None:
    message = UserMessage.model_validate(
        {
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image", "data": "aGk=", "mime_type": "image/png"},
            ]
        }
    )
    assert [type(b) for b in message.content] == [TextContent, ImageContent]


def test_an_unknown_role_is_rejected() -> None:
    with pytest.raises(ValidationError):
        MessageAdapter.validate_python({"role": "system", "content": "x"})


def test_a_user_message_cannot_carry_a_tool_call() -> None:
    with pytest.raises(ValidationError):
        UserMessage(content=[ToolCall(id="1", name="ls")])


def test_an_assistant_message_cannot_carry_an_image() -> None:
    with pytest.raises(ValidationError):
        AssistantMessage(content=[ImageContent(data="", mime_type="image/png")])


def test_models_are_frozen() -> None:
    message = UserMessage(content="hi")
    with pytest.raises(ValidationError):
        message.content = "changed"  # type: ignore[misc]


def test_unknown_fields_are_rejected() -> None:
    with pytest.raises(ValidationError):
        TextContent.model_validate({"type": "text", "text": "x", "bold": True})


def test_timestamp_defaults_to_now() -> None:
    import time

    before = time.time()
    message = UserMessage(content="hi")
    assert before <= message.timestamp <= time.time()


def test_assistant_text_concatenates_only_text_blocks() -> None:
    message = AssistantMessage(
        content=[
            TextContent(text="Hello, "),
            ThinkingContent(thinking="hmm"),
            ToolCall(id="c1", name="ls", arguments={"path": "."}),
            TextContent(text="world"),
        ]
    )
    assert message.text == "Hello, world"
    assert message.tool_calls == [ToolCall(id="c1", name="ls", arguments={"path": "."})]


def test_user_text_reads_a_string_or_its_text_blocks() -> None:
    assert UserMessage(content="plain").text == "plain"
    blocks = UserMessage(
        content=[TextContent(text="a"), ImageContent(data="", mime_type="x"), TextContent(text="b")]
    )
    assert blocks.text == "ab"


def test_tool_result_message_text_reads_its_text_blocks() -> None:
    message = ToolResultMessage(
        tool_call_id="c1", tool_name="ls", content=[TextContent(text="one"), TextContent(text="2")]
    )
    assert message.text == "one2"


def test_tool_result_text_builds_one_text_block() -> None:
    result = ToolResult.text("boom", is_error=True, details={"code": 1})
    assert result == ToolResult(
        content=[TextContent(text="boom")], is_error=True, details={"code": 1}
    )
    assert result.trust == "trusted"


def test_tool_result_text_rejects_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        ToolResult.text("x", colour="red")


def test_usage_total_counts_input_and_output() -> None:
    assert Usage(input_tokens=10, output_tokens=5, cached_input_tokens=4).total_tokens == 15


@given(s.usages, s.usages, s.usages)
def test_usage_addition_is_a_commutative_monoid(a: Usage, b: Usage, c: Usage) -> None:
    assert a + Usage() == a
    assert a + b == b + a
    assert (a + b) + c == a + (b + c)
    assert (a + b).total_tokens == a.total_tokens + b.total_tokens


# -- text integrity: lone surrogates ----------------------------------------------------------

SURROGATE = st.integers(0xD800, 0xDFFF).map(chr)
ANY_TEXT = st.lists(st.one_of(st.characters(), SURROGATE), max_size=12).map("".join)


def messages_made_of(text: str) -> list[Any]:
    """Every kind of message and result, with `text` in each of its strings."""
    return [
        UserMessage(content=text),
        UserMessage(content=[TextContent(text=text), ImageContent(data=text, mime_type=text)]),
        AssistantMessage(
            content=[
                TextContent(text=text),
                ThinkingContent(thinking=text, signature=text),
                ToolCall(
                    id=text, name=text, arguments={text: [text, {"k": text}]}, raw_arguments=text
                ),
            ],
            error_message=text,
            model=text,
            provider=text,
        ),
        ToolResultMessage(
            tool_call_id=text,
            tool_name=text,
            content=[TextContent(text=text)],
            details={text: text},
        ),
        ToolResult(content=[TextContent(text=text)], details={"nested": [text]}),
    ]


def test_a_lone_surrogate_becomes_the_replacement_character() -> None:
    assert UserMessage(content="q \udcff").content == "q \ufffd"
    assert ToolResult.text("ls: \udc80x").content == [TextContent(text="ls: \ufffdx")]
    call = ToolCall(id="c", name="open", arguments={"path": "/tmp/\udcff"})
    assert call.arguments == {"path": "/tmp/\ufffd"}
    assert TextContent(text="\ud83d\ude00").text == "\U0001f600"  # a split pair, joined


@given(text=ANY_TEXT)
def test_every_message_of_any_text_encodes_as_utf8_and_round_trips_through_json(text: str) -> None:
    for message in messages_made_of(text):
        dumped = message.model_dump_json()
        dumped.encode("utf-8")
        assert type(message).model_validate_json(dumped) == message


@given(text=st.text())
def test_text_without_surrogates_is_kept_exactly(text: str) -> None:
    assert TextContent(text=text).text == text
    assert ToolCall(id="c", name="n", arguments={"a": text}).arguments == {"a": text}


def test_a_prompt_with_a_lone_surrogate_is_answered_and_stored_in_session_memory() -> None:
    with Runtime.start(RuntimeConfig()) as runtime:  # SQLite memory in the test's directory
        model = ScriptedModel(["seen", "again"])
        agent = runtime.start_agent(("s", "main", 0), model=model)
        assert agent.run("q \udcff", timeout=10).text == "seen"
        assert agent.run("next", timeout=10).text == "again"
        wait_until(lambda: len(runtime.memory.history("s").messages) == 4, timeout=10)
    with Runtime.start(RuntimeConfig()) as runtime:
        texts = [m.text for m in runtime.memory.history("s").messages]
    assert texts == ["q \ufffd", "seen", "next", "again"]
    assert [m.text for m in model.requests[1].messages] == ["q \ufffd", "seen", "next"]
