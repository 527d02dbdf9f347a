"""The OpenAI Chat Completions conversions, as pure functions (no HTTP)."""

from __future__ import annotations

import pytest

from agent_runtime.llm.errors import ProviderError
from agent_runtime.llm.providers._openai_convert import (
    chunk_deltas,
    request_body,
    response_from_wire,
    stop_reason_of,
    to_wire_messages,
    usage_of,
)
from agent_runtime.llm.types import (
    ChatRequest,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolSpec,
    UsageDelta,
)
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

PNG = ImageContent(data="iVBORw0KGgo=", mime_type="image/png")


def body_for(request: ChatRequest, **kw: object) -> dict[str, object]:
    return request_body(request, model="m", stream=False, **kw)  # type: ignore[arg-type]


def test_system_is_the_first_message_and_user_text_stays_a_string() -> None:
    wire = to_wire_messages([UserMessage(content="hi")], system="be brief")
    assert wire == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]


def test_text_only_blocks_are_sent_as_one_string() -> None:
    message = UserMessage(content=[TextContent(text="a"), TextContent(text="b")])
    assert to_wire_messages([message]) == [{"role": "user", "content": "ab"}]


def test_images_make_content_parts_with_a_data_url() -> None:
    message = UserMessage(content=[TextContent(text="what is this?"), PNG])
    assert to_wire_messages([message])[0]["content"] == [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ]


def test_assistant_tool_calls_carry_json_string_arguments_and_thinking_is_dropped() -> None:
    message = AssistantMessage(
        content=[
            ThinkingContent(thinking="let me think", signature="sig"),
            ToolCall(id="call_1", name="read", arguments={"path": "a.txt"}),
        ]
    )
    assert to_wire_messages([message]) == [
        {
            "role": "assistant",
            # "", not null: llama-cpp-python's server rejects a null (or missing) content
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "a.txt"}'},
                }
            ],
        }
    ]


def test_assistant_text_without_calls_has_no_tool_calls_field() -> None:
    message = AssistantMessage(content=[TextContent(text="done")])
    assert to_wire_messages([message]) == [{"role": "assistant", "content": "done"}]


def test_tool_results_become_tool_messages() -> None:
    result = ToolResultMessage(
        tool_call_id="call_1", tool_name="read", content=[TextContent(text="42")]
    )
    assert to_wire_messages([result]) == [
        {"role": "tool", "tool_call_id": "call_1", "content": "42"}
    ]


def test_tool_result_images_follow_the_run_of_tool_messages() -> None:
    results: list[Message] = [
        ToolResultMessage(tool_call_id="a", tool_name="shot", content=[TextContent(text="1"), PNG]),
        ToolResultMessage(tool_call_id="b", tool_name="shot", content=[TextContent(text="2")]),
        UserMessage(content="and now?"),
    ]
    roles = [m["role"] for m in to_wire_messages(results)]
    assert roles == ["tool", "tool", "user", "user"]
    images = to_wire_messages(results)[2]["content"]
    assert isinstance(images, list) and images[1]["type"] == "image_url"


def test_tools_and_a_named_tool_choice() -> None:
    spec = ToolSpec(name="read", description="Read a file.")
    body = body_for(ChatRequest(tools=[spec], tool_choice="read"))
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "read"}}


@pytest.mark.parametrize("choice", ["auto", "none", "required"])
def test_keyword_tool_choices_are_sent_as_is(choice: str) -> None:
    body = body_for(ChatRequest(tools=[ToolSpec(name="t")], tool_choice=choice))
    assert body["tool_choice"] == choice


def test_tool_choice_without_tools_is_not_sent() -> None:
    assert "tool_choice" not in body_for(ChatRequest(tool_choice="none"))


@pytest.mark.parametrize(
    ("level", "effort"),
    [
        ("minimal", "minimal"),
        ("low", "low"),
        ("medium", "medium"),
        ("high", "high"),
        ("xhigh", "high"),
    ],
)
def test_reasoning_levels_map_to_reasoning_effort(level: str, effort: str) -> None:
    assert body_for(ChatRequest(reasoning=level))["reasoning_effort"] == effort


@pytest.mark.parametrize("level", ["off", None])
def test_reasoning_off_sends_nothing(level: str | None) -> None:
    assert "reasoning_effort" not in body_for(ChatRequest(reasoning=level))


def test_max_output_tokens_goes_to_the_configured_field() -> None:
    request = ChatRequest(max_output_tokens=100, temperature=0.2)
    assert body_for(request)["max_tokens"] == 100
    official = body_for(request, max_tokens_param="max_completion_tokens")
    assert official["max_completion_tokens"] == 100 and "max_tokens" not in official
    assert official["temperature"] == 0.2


def test_response_schema_uses_json_schema_mode_strict_only_when_the_schema_allows() -> None:
    loose = {"type": "object", "properties": {"x": {"type": "integer"}}}
    assert body_for(ChatRequest(response_schema=loose))["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": loose, "strict": False},
    }
    tight = {**loose, "required": ["x"], "additionalProperties": False}
    strict = body_for(ChatRequest(response_schema=tight))["response_format"]["json_schema"]
    assert strict["strict"] is True


def test_json_object_mode_puts_the_schema_in_the_system_message() -> None:
    schema = {"type": "object"}
    request = ChatRequest(system="sys", response_schema=schema)
    body = body_for(request, structured_output_mode="json_object")
    assert body["response_format"] == {"type": "json_object"}
    system = body["messages"][0]  # type: ignore[index]
    assert system["role"] == "system" and system["content"].startswith("sys\n\n")
    assert '{"type": "object"}' in system["content"] and "JSON" in system["content"]


def test_a_streamed_call_asks_for_the_usage_chunk() -> None:
    body = request_body(ChatRequest(), model="m", stream=True)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert "stream" not in body_for(ChatRequest())


def test_chunk_deltas_reads_content_reasoning_and_tool_fragments() -> None:
    payload = {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "reasoning_content": "hm",
                    "content": "Hi",
                    "tool_calls": [
                        {"index": 1, "id": "", "function": {"name": "", "arguments": '{"a"'}}
                    ],
                },
                "finish_reason": None,
            }
        ]
    }
    chunks, finish = chunk_deltas(payload)
    assert chunks == [
        ThinkingDelta(text="hm"),
        TextDelta(text="Hi"),
        ToolCallDelta(index=1, id=None, name=None, arguments='{"a"'),
    ]
    assert finish is None


def test_chunk_deltas_reads_the_reasoning_field_and_object_arguments() -> None:
    payload = {
        "choices": [
            {
                "delta": {
                    "reasoning": "r",
                    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"x": 1}}}],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }
    chunks, finish = chunk_deltas(payload)
    assert chunks == [
        ThinkingDelta(text="r"),
        ToolCallDelta(index=None, id="c", name="f", arguments='{"x": 1}'),
    ]
    assert finish == "tool_calls"


def test_the_usage_chunk_has_empty_choices() -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 3, "prompt_tokens_details": None}
    chunks, finish = chunk_deltas({"choices": [], "usage": usage})
    assert chunks == [UsageDelta(usage=Usage(input_tokens=10, output_tokens=3))]
    assert finish is None


def test_other_choices_are_ignored() -> None:
    chunks, _ = chunk_deltas({"choices": [{"index": 1, "delta": {"content": "no"}}]})
    assert chunks == []


def test_cached_tokens_from_openai_and_deepseek_fields() -> None:
    openai_usage = {
        "prompt_tokens": 100,
        "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 64},
    }
    deepseek_usage = {"prompt_tokens": 100, "completion_tokens": 5, "prompt_cache_hit_tokens": 90}
    assert usage_of(openai_usage) == Usage(
        input_tokens=100, output_tokens=5, cached_input_tokens=64
    )
    assert usage_of(deepseek_usage).cached_input_tokens == 90


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("stop", "stop"),
        (None, "stop"),
        ("length", "length"),
        ("tool_calls", "tool_use"),
        ("function_call", "tool_use"),
        ("content_filter", "error"),
        ("something_new", "stop"),
    ],
)
def test_finish_reasons(raw: str | None, reason: str) -> None:
    assert stop_reason_of(raw) == reason


def test_a_completion_body_becomes_a_response() -> None:
    body = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "reasoning_content": "think",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "read", "arguments": '{"path": "x"}'},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 2},
    }
    response = response_from_wire(body, model="m", provider="p", request_id="r")
    assert response.message.content == [
        ThinkingContent(thinking="think"),
        ToolCall(id="call_1", name="read", arguments={"path": "x"}),
    ]
    assert response.stop_reason == "tool_use" and response.raw_finish_reason == "tool_calls"
    assert response.usage == Usage(input_tokens=7, output_tokens=2)
    assert response.request_id == "r"


def test_a_body_without_choices_is_a_provider_error() -> None:
    with pytest.raises(ProviderError, match="without choices"):
        response_from_wire({"choices": []}, model="m", provider="p")
