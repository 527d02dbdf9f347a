"""Typed errors from the real server (issue 15: items 3-5, and the bad requests)."""

from __future__ import annotations

import re
import socket

import httpx
import pytest

from agent_runtime.llm import (
    ContextLengthExceededError,
    InvalidRequestError,
    LLMError,
    ModelNotFoundError,
    NetworkError,
    OpenAICompatibleModel,
    RetryingModel,
    ToolSpec,
    llama_cpp,
)
from agent_runtime.llm._error_map import MAX_MESSAGE_CHARS, map_error
from tests.live.helpers import SECONDS, ask, chunks_of

ADD = ToolSpec(name="add", description="Add.", parameters={"type": "object", "properties": {}})


def too_long(n_ctx: int) -> str:
    return "word " * (n_ctx + 500)  # " word" is one token


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
def test_an_over_long_prompt_is_context_length_exceeded(
    model: OpenAICompatibleModel, n_ctx: int, streaming: bool
) -> None:
    """Streamed, the server answers an empty 200 stream; the adapter asks once more without
    streaming and raises the error that answer names."""
    request = ask(too_long(n_ctx))
    with pytest.raises(ContextLengthExceededError) as caught:
        chunks_of(model, request) if streaming else model.generate_sync(request, timeout=SECONDS)
    assert not caught.value.retryable and f"{n_ctx} tokens" in caught.value.message


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
def test_an_unknown_tool_in_tool_choice_is_an_invalid_request_not_retried(
    model: OpenAICompatibleModel, streaming: bool
) -> None:
    retries: list[LLMError] = []
    retrying = RetryingModel(model, base_delay=0.0, on_retry=lambda n, d, e: retries.append(e))
    request = ask("hi", tools=[ADD], tool_choice="nope")
    with pytest.raises(InvalidRequestError, match="nope"):
        if streaming:
            chunks_of(retrying, request)
        else:
            retrying.generate_sync(request, timeout=SECONDS)
    assert retries == []


def test_the_servers_validation_500_is_a_short_invalid_request(base_url: str) -> None:
    """What the server says to a null content (the adapter no longer sends one)."""
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "add"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    answer = httpx.post(
        f"{base_url}/chat/completions", json={"model": "m", "messages": messages}, timeout=SECONDS
    )
    assert answer.status_code == 500 and len(answer.content) > 1000
    error = map_error(500, answer.json(), provider="llama_cpp")
    assert type(error) is InvalidRequestError and not error.retryable
    assert len(error.message.split(" [")[0]) <= MAX_MESSAGE_CHARS


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
def test_a_base_url_without_v1_names_the_url_called(
    base_url: str, served_model: str, streaming: bool
) -> None:
    root = base_url.removesuffix("/v1")
    model = llama_cpp(served_model, root)
    with pytest.raises(ModelNotFoundError) as caught:
        chunks_of(model, ask("hi")) if streaming else model.generate_sync(ask("hi"), timeout=30)
    assert f"POST {root}/chat/completions" in caught.value.message


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
def test_a_required_tool_choice_names_the_option_the_server_rejects(
    model: OpenAICompatibleModel, mode: str, streaming: bool
) -> None:
    """chatml-function-calling answers `required` with a bare 500 (an empty message; streamed,
    an empty 200 stream): the error names tool_choice and is not retried (issue 35.14). The
    GGUF's own template may serve it: then it is an answer."""
    retries: list[LLMError] = []
    retrying = RetryingModel(model, base_delay=0.0, on_retry=lambda n, d, e: retries.append(e))
    request = ask("What is 2 plus 3?", tools=[ADD], tool_choice="required")
    try:
        if streaming:
            chunks_of(retrying, request)
        else:
            retrying.generate_sync(request, timeout=SECONDS)
    except LLMError as error:
        assert error.status == 500 and "tool_choice='required'" in error.message
        assert not error.retryable and retries == []
    else:
        assert mode != "chatml-function-calling", "the server used to reject tool_choice=required"


def test_a_retried_read_timeout_reports_each_attempts_duration(
    base_url: str, served_model: str
) -> None:
    """A read timeout far below the time the server takes to answer (issue 35.15): each
    attempt's error says how long it took, the retry's and the final one's."""
    retries: list[LLMError] = []
    model = llama_cpp(served_model, base_url, timeout=0.01)
    retrying = RetryingModel(
        model, max_retries=1, base_delay=0.0, on_retry=lambda n, d, e: retries.append(e)
    )
    request = ask("Count from one to fifty in words.", max_output_tokens=64)
    with pytest.raises(NetworkError) as caught:
        retrying.generate_sync(request, timeout=SECONDS)
    errors = [*retries, caught.value]
    assert len(errors) == 2 and all(isinstance(error, NetworkError) for error in errors)
    assert all(re.search(r"ReadTimeout .* after \d+\.\d\ds", e.message) for e in errors)


def test_a_port_nothing_listens_on_fails_at_once_naming_the_url(served_model: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    retrying = RetryingModel(llama_cpp(served_model, url), base_delay=5.0)
    with pytest.raises(NetworkError) as caught:
        retrying.generate_sync(ask("hi"), timeout=SECONDS)
    assert caught.value.code == "connection_refused" and f"{url}/chat/completions" in str(
        caught.value
    )
