"""Gemini conversions without HTTP: our transcript -> request body, response chunks -> ours."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_runtime.config import ThinkingBudgets
from agent_runtime.llm import (
    ChatResponseBuilder,
    FinishDelta,
    NetworkError,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    UsageDelta,
)
from agent_runtime.llm.providers._gemini_convert import (
    SYNTHETIC_CALL_ID_PREFIX,
    GeminiStreamDecoder,
    contents_to_wire,
    request_body,
    stop_reason_from_wire,
)
from agent_runtime.llm.types import ChatRequest, ToolSpec
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


def decode(*chunks: dict[str, Any]) -> AssistantMessage:
    """The assistant message a sequence of response chunks builds into."""
    decoder = GeminiStreamDecoder()
    builder = ChatResponseBuilder(model="m", provider="gemini")
    for chunk in chunks:
        for delta in decoder.feed(chunk):
            builder.add(delta)
    builder.add(decoder.finish())
    return builder.build().message


def chunk(*parts: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish is not None:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], **extra}


# -- request body ------------------------------------------------------------------------------


def test_system_goes_to_system_instruction_and_messages_to_contents() -> None:
    body = request_body(ChatRequest(system="be brief", messages=[UserMessage(content="hi")]))
    assert body == {
        "systemInstruction": {"parts": [{"text": "be brief"}]},
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
    }


def test_user_images_become_inline_data_parts() -> None:
    message = UserMessage(
        content=[TextContent(text="what is it?"), ImageContent(data="AAAA", mime_type="image/png")]
    )
    assert contents_to_wire([message])[0]["parts"] == [
        {"text": "what is it?"},
        {"inlineData": {"mimeType": "image/png", "data": "AAAA"}},
    ]


def test_tools_are_function_declarations_with_json_schema_parameters() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Args",
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": False,
    }
    body = request_body(
        ChatRequest(
            messages=[UserMessage(content="x")],
            tools=[ToolSpec(name="read", description="Read a file.", parameters=schema)],
        )
    )
    declaration = body["tools"][0]["functionDeclarations"][0]
    assert declaration == {
        "name": "read",
        "description": "Read a file.",
        "parametersJsonSchema": {k: v for k, v in schema.items() if k != "$schema"},
    }
    assert "toolConfig" not in body


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
        ("read", {"mode": "ANY", "allowedFunctionNames": ["read"]}),
    ],
)
def test_tool_choice_maps_to_function_calling_mode(choice: str, config: dict[str, Any]) -> None:
    request = ChatRequest(tools=[ToolSpec(name="read")], tool_choice=choice)
    assert request_body(request)["toolConfig"] == {"functionCallingConfig": config}


@pytest.mark.parametrize("level", ["minimal", "low", "medium", "high", "xhigh"])
def test_reasoning_levels_send_their_thinking_budget(level: str) -> None:
    budgets = ThinkingBudgets(minimal=1, low=2, medium=3, high=4, xhigh=5)
    body = request_body(ChatRequest(reasoning=level), budgets=budgets)
    assert body["generationConfig"]["thinkingConfig"] == {
        "thinkingBudget": getattr(budgets, level),
        "includeThoughts": True,
    }


@pytest.mark.parametrize("level", ["off", None])
def test_reasoning_off_sends_no_thinking_config(level: str | None) -> None:
    body = request_body(ChatRequest(reasoning=level, max_output_tokens=10))
    assert body["generationConfig"] == {"maxOutputTokens": 10}


def test_response_schema_uses_the_json_schema_response_mode() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    config = request_body(ChatRequest(response_schema=schema, temperature=0.2))["generationConfig"]
    assert config == {
        "temperature": 0.2,
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }


# -- transcript -> contents --------------------------------------------------------------------


def test_consecutive_tool_results_merge_into_one_user_content() -> None:
    contents = contents_to_wire(
        [
            AssistantMessage(
                content=[
                    ToolCall(id="a1", name="read", arguments={"p": 1}),
                    ToolCall(id="a2", name="list", arguments={}),
                ],
                provider="gemini",
            ),
            ToolResultMessage(
                tool_call_id="a1", tool_name="read", content=[TextContent(text="data")]
            ),
            ToolResultMessage(
                tool_call_id="a2",
                tool_name="list",
                content=[TextContent(text="denied"), ImageContent(data="QQ", mime_type="i/p")],
                is_error=True,
            ),
            UserMessage(content="thanks"),
        ]
    )
    assert contents == [
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "read", "args": {"p": 1}, "id": "a1"}},
                {"functionCall": {"name": "list", "args": {}, "id": "a2"}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "read", "response": {"result": "data"}, "id": "a1"}},
                {"functionResponse": {"name": "list", "response": {"error": "denied"}, "id": "a2"}},
                {"inlineData": {"mimeType": "i/p", "data": "QQ"}},
            ],
        },
        {"role": "user", "parts": [{"text": "thanks"}]},
    ]


def test_synthesized_ids_are_never_sent() -> None:
    synthetic = f"{SYNTHETIC_CALL_ID_PREFIX}0"
    contents = contents_to_wire(
        [
            AssistantMessage(content=[ToolCall(id=synthetic, name="read")], provider="gemini"),
            ToolResultMessage(tool_call_id=synthetic, tool_name="read"),
        ]
    )
    assert contents[0]["parts"] == [{"functionCall": {"name": "read", "args": {}}}]
    assert contents[1]["parts"] == [
        {"functionResponse": {"name": "read", "response": {"result": ""}}}
    ]


def test_a_signature_goes_on_the_next_part_and_thought_text_on_a_thought_part() -> None:
    message = AssistantMessage(
        content=[
            ThinkingContent(thinking="plan", signature="S1"),
            TextContent(text="calling"),
            ThinkingContent(thinking="", signature="S2"),
            ToolCall(id="c", name="f"),
        ],
        provider="gemini",
    )
    assert contents_to_wire([message])[0]["parts"] == [
        {"text": "plan", "thought": True},
        {"text": "calling", "thoughtSignature": "S1"},
        {"functionCall": {"name": "f", "args": {}, "id": "c"}, "thoughtSignature": "S2"},
    ]


def test_a_trailing_signature_is_sent_on_an_empty_text_part() -> None:
    message = AssistantMessage(
        content=[TextContent(text="done"), ThinkingContent(thinking="", signature="S")]
    )
    assert contents_to_wire([message])[0]["parts"] == [
        {"text": "done"},
        {"text": "", "thoughtSignature": "S"},
    ]


def test_thinking_of_other_providers_is_dropped() -> None:
    message = AssistantMessage(
        content=[ThinkingContent(thinking="hmm", signature="anthropic-sig"), TextContent(text="a")],
        provider="anthropic",
    )
    assert contents_to_wire([message])[0]["parts"] == [{"text": "a"}]


def test_empty_messages_are_left_out() -> None:
    assert contents_to_wire([UserMessage(content=""), AssistantMessage(content=[])]) == []


# -- response chunks -> ours -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "ours"),
    [("STOP", "stop"), ("MAX_TOKENS", "length"), ("SAFETY", "error"), ("RECITATION", "error")],
)
def test_finish_reasons_map(raw: str, ours: str) -> None:
    assert stop_reason_from_wire(raw) == ours


def test_thought_parts_become_thinking_and_signatures_precede_their_part() -> None:
    decoder = GeminiStreamDecoder()
    deltas = decoder.feed(
        chunk(
            {"text": "let me see", "thought": True},
            {"text": "Hi", "thoughtSignature": "S"},
            {"functionCall": {"name": "f", "args": {"a": 1}, "id": "x"}},
            finish="STOP",
        )
    )
    assert deltas == [
        ThinkingDelta(text="let me see"),
        ThinkingDelta(signature="S"),
        TextDelta(text="Hi"),
        ToolCallDelta(index=0, id="x", name="f", arguments='{"a": 1}'),
    ]
    assert decoder.finish() == FinishDelta(reason="stop", raw_reason="STOP")


def test_calls_without_ids_get_distinct_deterministic_ids() -> None:
    parts = ({"functionCall": {"name": "f", "args": {}}}, {"functionCall": {"name": "g"}})
    first = decode(chunk(*parts, finish="STOP", responseId="r/1"))
    again = decode(chunk(*parts, finish="STOP", responseId="r/1"))
    ids = [c.id for c in first.tool_calls]
    assert ids == [f"{SYNTHETIC_CALL_ID_PREFIX}r1-0", f"{SYNTHETIC_CALL_ID_PREFIX}r1-1"]
    assert ids == [c.id for c in again.tool_calls]
    no_response_id = decode(chunk(*parts, finish="STOP"))
    assert [c.id for c in no_response_id.tool_calls] == [
        f"{SYNTHETIC_CALL_ID_PREFIX}0",
        f"{SYNTHETIC_CALL_ID_PREFIX}1",
    ]


def test_usage_counts_thoughts_as_output_and_cached_tokens_as_input() -> None:
    decoder = GeminiStreamDecoder()
    usage = {
        "promptTokenCount": 100,
        "cachedContentTokenCount": 60,
        "candidatesTokenCount": 7,
        "thoughtsTokenCount": 5,
    }
    assert decoder.feed({"usageMetadata": usage}) == [
        UsageDelta(usage=Usage(input_tokens=100, output_tokens=12, cached_input_tokens=60))
    ]


def test_a_blocked_prompt_is_a_terminal_error() -> None:
    decoder = GeminiStreamDecoder()
    decoder.feed({"promptFeedback": {"blockReason": "SAFETY"}})
    assert decoder.finish() == FinishDelta(reason="error", raw_reason="PROMPT_BLOCKED:SAFETY")


def test_no_finish_reason_means_the_stream_was_cut() -> None:
    decoder = GeminiStreamDecoder()
    decoder.feed(chunk({"text": "partial"}, finish="FINISH_REASON_UNSPECIFIED"))
    with pytest.raises(NetworkError):
        decoder.finish()


# -- round trip: Gemini parts -> our message -> the same parts ---------------------------------

_text = st.text(alphabet="abc ", min_size=1, max_size=5)
_signature = st.none() | st.text(alphabet="XYZ0123=", min_size=1, max_size=6)
_part = st.tuples(st.sampled_from(["text", "f", "g"]), _text, _signature)


def _wire_part(n: int, kind: str, text: str, signature: str | None) -> dict[str, Any]:
    part: dict[str, Any] = (
        {"text": text}
        if kind == "text"
        else {"functionCall": {"name": kind, "args": {"k": text}, "id": f"id{n}"}}
    )
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def _expected(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Streamed text parts without a signature continue the answer text before them."""
    out: list[dict[str, Any]] = []
    for part in parts:
        previous = out[-1] if out else {}
        continues = "text" in previous and "thought" not in previous
        if continues and "text" in part and "thoughtSignature" not in part:
            out[-1] = {**previous, "text": previous["text"] + part["text"]}
        else:
            out.append(dict(part))
    return out


@settings(max_examples=150, deadline=None)
@given(
    thought=st.none() | _text,
    parts=st.lists(_part, max_size=6),
    trailing=_signature,
    split=st.booleans(),
)
def test_model_parts_round_trip_with_their_signatures(
    thought: str | None,
    parts: list[tuple[str, str, str | None]],
    trailing: str | None,
    split: bool,
) -> None:
    wire = [_wire_part(n, *p) for n, p in enumerate(parts)]
    if trailing is not None:
        wire.append({"text": "", "thoughtSignature": trailing})
    if thought is not None:
        wire.insert(0, {"text": thought, "thought": True})
    chunks = [chunk(p) for p in wire] if split else [chunk(*wire)]
    message = decode(*chunks, chunk(finish="STOP"))
    assert contents_to_wire([message]) == (
        [{"role": "model", "parts": _expected(wire)}] if wire else []
    )
