"""The public names and call signatures DESIGN.md sections 8 and 11 fix, as callers write them."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

import agent_runtime.llm as llm
import agent_runtime.testing as testing
from agent_runtime import AgentRuntimeError
from agent_runtime.llm import (
    AuthenticationError,
    CapabilityNotSupportedError,
    ChatModel,
    ChatRequest,
    ChatResponse,
    ContextLengthExceededError,
    InvalidRequestError,
    LLMError,
    ModelNotFoundError,
    NetworkError,
    PermissionDeniedError,
    ProviderError,
    QuotaExceededError,
    RateLimitError,
)
from agent_runtime.messages import AssistantMessage, TextContent, ToolCall, Usage
from agent_runtime.testing import ScriptedModel, ScriptedTurn


def leading(function: Callable[..., Any], count: int) -> list[tuple[str, Any]]:
    """The first `count` parameters of `function`, as (name, default) pairs."""
    parameters = list(inspect.signature(function).parameters.values())[:count]
    return [(p.name, p.default) for p in parameters]


EMPTY = inspect.Parameter.empty


def test_the_adapter_factories_take_the_design_arguments_positionally() -> None:
    assert leading(llm.openai_compatible, 3) == [
        ("base_url", EMPTY),
        ("model", EMPTY),
        ("api_key", None),
    ]
    assert leading(llm.anthropic, 2) == [("model", EMPTY), ("api_key", None)]
    assert leading(llm.gemini, 2) == [("model", EMPTY), ("api_key", None)]
    for factory in (llm.openai_compatible, llm.anthropic, llm.gemini):
        assert "base_url" in inspect.signature(factory).parameters


def test_from_config_takes_a_profile_name() -> None:
    assert leading(llm.from_config, 1) == [("name", None)]


def test_the_chat_model_port_has_the_design_methods() -> None:
    methods = {"generate", "stream", "prompt", "generate_sync", "prompt_sync", "info"}
    assert methods <= set(dir(ChatModel))
    assert leading(ChatModel.prompt, 3) == [("self", EMPTY), ("text", EMPTY), ("system", None)]
    assert leading(ChatModel.prompt_sync, 3) == leading(ChatModel.prompt, 3)
    assert isinstance(ScriptedModel([]), ChatModel)


def test_chat_request_and_response_carry_the_design_fields() -> None:
    assert list(ChatRequest.model_fields)[:8] == [
        "messages",
        "system",
        "tools",
        "tool_choice",
        "temperature",
        "max_output_tokens",
        "response_schema",
        "reasoning",
    ]
    usage = Usage(input_tokens=3, output_tokens=2, cached_input_tokens=1)
    message = AssistantMessage(content=[TextContent(text="hi")])
    response = ChatResponse(message=message, usage=usage, stop_reason="stop", cost=0.5)
    assert (response.message, response.usage, response.stop_reason, response.cost) == (
        message,
        usage,
        "stop",
        0.5,
    )


def test_scripted_turn_takes_the_design_signature_positionally_or_by_keyword() -> None:
    error = RateLimitError("slow")
    call = ToolCall(id="c1", name="f")
    by_position = ScriptedTurn("ab", [call], ["a", "b"], 0.5, 0.25, error)
    by_keyword = ScriptedTurn(
        text="ab", tool_calls=[call], chunks=["a", "b"], delay=0.5, chunk_delay=0.25, error=error
    )
    assert by_position == by_keyword
    default = ScriptedTurn()
    assert (default.text, default.tool_calls, default.chunks) == ("", [], None)
    assert (default.delay, default.chunk_delay, default.error) == (0.0, 0.0, None)


def test_a_positional_scripted_turn_plays_as_text() -> None:
    model = ScriptedModel([ScriptedTurn("hello")])
    assert model.prompt_sync("hi", timeout=5) == "hello"
    assert model.call_count == 1 and model.requests[0].messages[0].text == "hi"


def test_the_test_doubles_are_public() -> None:
    assert {"ScriptedModel", "ScriptedTurn", "MockProviderServer"} <= set(testing.__all__)


ERRORS: list[tuple[type[LLMError], bool, int | None]] = [
    (LLMError, False, None),
    (AuthenticationError, False, 401),
    (PermissionDeniedError, False, 403),
    (RateLimitError, True, 429),
    (QuotaExceededError, False, 429),
    (InvalidRequestError, False, 400),
    (ContextLengthExceededError, False, 400),
    (ModelNotFoundError, False, 404),
    (ProviderError, True, 500),
    (NetworkError, True, None),
    (CapabilityNotSupportedError, False, None),
]


@pytest.mark.parametrize(
    ("cls", "retryable", "status"), ERRORS, ids=[e[0].__name__ for e in ERRORS]
)
def test_an_error_built_from_a_message_takes_code_retryable_and_status_from_its_class(
    cls: type[LLMError], retryable: bool, status: int | None
) -> None:
    error = cls("it broke")
    assert error.message == "it broke" and error.retry_after is None
    assert (error.retryable, error.status) == (retryable, status)
    assert error.code == cls.default_code and error.code
    assert isinstance(error, AgentRuntimeError) and cls.__name__ in llm.__all__


def test_the_error_codes_tell_the_conditions_apart() -> None:
    codes = [cls.default_code for cls, _, _ in ERRORS]
    assert len(set(codes)) == len(codes)


def test_retry_after_is_the_second_argument_and_keywords_override_the_class() -> None:
    assert RateLimitError("slow", 2.5).retry_after == 2.5
    error = ProviderError(
        "overloaded", retry_after=1.0, retryable=False, status=529, code="overloaded"
    )
    assert (error.retry_after, error.retryable, error.status, error.code) == (
        1.0,
        False,
        529,
        "overloaded",
    )


def test_context_length_is_an_invalid_request() -> None:
    assert issubclass(ContextLengthExceededError, InvalidRequestError)
