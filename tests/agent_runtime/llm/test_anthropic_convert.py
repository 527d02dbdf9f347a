"""The Anthropic adapter's pure conversions: our messages to the wire, wire events to chunks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_runtime.config import ThinkingBudgets
from agent_runtime.llm.builder import ChatResponseBuilder
from agent_runtime.llm.providers._anthropic_convert import (
    StreamDecoder,
    chunks_from_message,
    messages_to_wire,
    request_body,
    stop_reason_from_wire,
)
from agent_runtime.llm.types import (
    ChatRequest,
    FinishDelta,
    StreamChunk,
    ThinkingDelta,
    ToolCallDelta,
    ToolSpec,
    UsageDelta,
)
from agent_runtime.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)


def user(text: str) -> UserMessage:
    return UserMessage(content=text, timestamp=0.0)


def result(call_id: str, text: str, *, is_error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id,
        tool_name="f",
        content=[TextContent(text=text)],
        is_error=is_error,
        timestamp=0.0,
    )


def decode(events: list[dict[str, Any]]) -> list[StreamChunk]:
    decoder = StreamDecoder()
    return [chunk for event in events for chunk in decoder.feed(event)]


# -- messages -> wire ----------------------------------------------------------------------------


def test_tool_results_merge_into_one_user_message_before_the_next_text() -> None:
    calls = [ToolCall(id="t1", name="f", arguments={"a": 1}), ToolCall(id="t2", name="f")]
    wire = messages_to_wire(
        [
            user("go"),
            AssistantMessage(content=[TextContent(text="on it"), *calls], timestamp=0.0),
            result("t1", "one"),
            result("t2", "two", is_error=True),
            user("and then?"),
        ]
    )
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert wire[1]["content"] == [
        {"type": "text", "text": "on it"},
        {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
        {"type": "tool_use", "id": "t2", "name": "f", "input": {}},
    ]
    assert wire[2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": [{"type": "text", "text": "one"}],
            "is_error": False,
        },
        {
            "type": "tool_result",
            "tool_use_id": "t2",
            "content": [{"type": "text", "text": "two"}],
            "is_error": True,
        },
        {"type": "text", "text": "and then?"},
    ]


def test_consecutive_messages_of_one_role_alternate_on_the_wire() -> None:
    wire = messages_to_wire(
        [
            user("a"),
            user("b"),
            AssistantMessage(content=[TextContent(text="c")], timestamp=0.0),
            AssistantMessage(content=[TextContent(text="d")], timestamp=0.0),
            user("e"),
        ]
    )
    assert [(m["role"], [b["text"] for b in m["content"]]) for m in wire] == [
        ("user", ["a", "b"]),
        ("assistant", ["c", "d"]),
        ("user", ["e"]),
    ]


def test_a_user_text_before_tool_results_is_moved_after_them() -> None:
    wire = messages_to_wire([user("steer"), result("t1", "done")])
    assert [b["type"] for b in wire[0]["content"]] == ["tool_result", "text"]


def test_empty_messages_and_empty_text_blocks_are_left_out() -> None:
    wire = messages_to_wire(
        [
            user("hi"),
            AssistantMessage(content=[TextContent(text="")], timestamp=0.0),
            user(""),
            user("there"),
        ]
    )
    assert wire == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "there"}],
        }
    ]


def test_thinking_is_sent_back_with_its_signature_and_unsigned_thinking_is_dropped() -> None:
    message = AssistantMessage(
        content=[
            ThinkingContent(thinking="plan", signature="sig+/=="),
            ThinkingContent(thinking="", signature="opaque", redacted=True),
            ThinkingContent(thinking="from another provider"),
            TextContent(text="answer"),
        ],
        timestamp=0.0,
    )
    wire = messages_to_wire([user("q"), message])
    assert wire[1]["content"] == [
        {"type": "thinking", "thinking": "plan", "signature": "sig+/=="},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "answer"},
    ]


def test_another_providers_signed_thinking_is_dropped() -> None:
    # A Gemini answer's thought carries Gemini's signature: Anthropic refuses it (400), so
    # switching providers mid conversation would fail.
    message = AssistantMessage(
        content=[ThinkingContent(thinking="think", signature="R2VtaW5p"), TextContent(text="a")],
        provider="gemini",
        timestamp=0.0,
    )
    assert messages_to_wire([user("q"), message])[1]["content"] == [{"type": "text", "text": "a"}]


def test_images_become_base64_sources() -> None:
    message = UserMessage(
        content=[TextContent(text="what is it?"), ImageContent(data="AAAA", mime_type="image/png")]
    )
    assert messages_to_wire([message])[0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
    }


# -- request body -------------------------------------------------------------------------------


def test_request_body_hoists_system_and_declares_tools() -> None:
    request = ChatRequest(
        messages=[user("hi")],
        system="be brief",
        tools=[ToolSpec(name="f", description="does f")],
        temperature=0.3,
        max_output_tokens=100,
    )
    body = request_body(request, model="claude-x", stream=True)
    assert body == {
        "model": "claude-x",
        "system": "be brief",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "tools": [
            {
                "name": "f",
                "description": "does f",
                "input_schema": {"type": "object", "properties": {}},
            }
        ],
        "temperature": 0.3,
        "max_tokens": 100,
        "stream": True,
    }


def test_max_tokens_defaults_to_the_adapter_setting() -> None:
    body = request_body(ChatRequest(messages=[user("hi")]), model="m", max_output_tokens=777)
    assert body["max_tokens"] == 777
    assert "stream" not in body and "system" not in body and "temperature" not in body


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ("lookup", {"type": "tool", "name": "lookup"}),
        (None, None),
    ],
)
def test_tool_choice_maps_to_the_api_shape(choice: str | None, wire: Any) -> None:
    request = ChatRequest(
        messages=[user("hi")], tools=[ToolSpec(name="lookup")], tool_choice=choice
    )
    assert request_body(request, model="m").get("tool_choice") == wire


def test_reasoning_enables_thinking_raises_max_tokens_and_drops_temperature() -> None:
    request = ChatRequest(
        messages=[user("hi")], reasoning="medium", temperature=0.7, max_output_tokens=1000
    )
    body = request_body(request, model="m", thinking_budgets=ThinkingBudgets(medium=5000))
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 5000}
    assert body["max_tokens"] == 6000
    assert "temperature" not in body


def test_max_tokens_above_the_budget_is_kept() -> None:
    request = ChatRequest(messages=[user("hi")], reasoning="low", max_output_tokens=9000)
    body = request_body(request, model="m", thinking_budgets=ThinkingBudgets(low=2048))
    assert body["max_tokens"] == 9000


def test_thinking_budget_is_at_least_the_api_minimum() -> None:
    request = ChatRequest(messages=[user("hi")], reasoning="minimal")
    body = request_body(request, model="m", thinking_budgets=ThinkingBudgets(minimal=10))
    assert body["thinking"]["budget_tokens"] == 1024


@pytest.mark.parametrize("level", ["off", None])
def test_reasoning_off_sends_no_thinking(level: Any) -> None:
    body = request_body(ChatRequest(messages=[user("hi")], reasoning=level), model="m")
    assert "thinking" not in body


def test_response_schema_is_json_mode_in_the_system_prompt() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    request = ChatRequest(messages=[user("hi")], system="be brief", response_schema=schema)
    system = request_body(request, model="m")["system"]
    assert system.startswith("be brief\n\n")
    assert "JSON" in system
    assert json.loads(system[system.index("{") :]) == schema


# -- wire -> chunks -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "ours"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("pause_turn", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "tool_use"),
        ("refusal", "error"),
        (None, "stop"),
    ],
)
def test_stop_reasons_map_to_ours(raw: str | None, ours: str) -> None:
    assert stop_reason_from_wire(raw) == ours


def test_usage_adds_cache_reads_and_writes_to_the_input() -> None:
    chunks = decode(
        [
            {
                "type": "message_start",
                "message": {
                    "usage": {
                        "input_tokens": 10,
                        "cache_read_input_tokens": 90,
                        "cache_creation_input_tokens": 5,
                        "output_tokens": 1,
                    }
                },
            },
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 42},
            },
            {"type": "message_stop"},
        ]
    )
    usages = [c.usage for c in chunks if isinstance(c, UsageDelta)]
    assert usages[-1] == Usage(input_tokens=105, output_tokens=42, cached_input_tokens=90)
    assert chunks[-1] == FinishDelta(reason="stop", raw_reason="end_turn")


def test_ping_and_unknown_events_yield_nothing() -> None:
    assert decode([{"type": "ping"}, {"type": "some_future_event", "x": 1}]) == []


def test_tool_call_fragments_carry_the_content_block_index() -> None:
    chunks = decode(
        [
            {
                "type": "content_block_start",
                "index": 3,
                "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}},
            },
            {
                "type": "content_block_delta",
                "index": 3,
                "delta": {"type": "input_json_delta", "partial_json": '{"a":'},
            },
        ]
    )
    assert chunks == [
        ToolCallDelta(index=3, id="t", name="f", arguments=""),
        ToolCallDelta(index=3, arguments='{"a":'),
    ]


def test_redacted_thinking_is_a_redacted_block_whose_signature_is_the_data() -> None:
    chunks = decode(
        [
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "redacted_thinking", "data": "blob"},
            }
        ]
    )
    assert chunks == [ThinkingDelta(signature="blob", redacted=True)]


def test_thinking_then_redacted_blocks_stay_separate_blocks() -> None:
    message = {
        "content": [
            {"type": "thinking", "thinking": "a", "signature": "s1"},
            {"type": "redacted_thinking", "data": "r1"},
            {"type": "redacted_thinking", "data": "r2"},
            {"type": "text", "text": "done"},
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    builder = ChatResponseBuilder()
    for chunk in chunks_from_message(message):
        builder.add(chunk)
    assert builder.build().message.content == [
        ThinkingContent(thinking="a", signature="s1"),
        ThinkingContent(thinking="", signature="r1", redacted=True),
        ThinkingContent(thinking="", signature="r2", redacted=True),
        TextContent(text="done"),
    ]


def test_a_non_streamed_message_ends_with_its_finish() -> None:
    chunks = chunks_from_message(
        {"content": [], "stop_reason": "max_tokens", "usage": {"output_tokens": 7}}
    )
    assert chunks == [
        UsageDelta(usage=Usage(output_tokens=7)),
        FinishDelta(reason="length", raw_reason="max_tokens"),
    ]
