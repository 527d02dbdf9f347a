"""Agents on the real server: a forced tool call, abort mid-stream, a delegated subagent and
an overflowing context (issue 15)."""

from __future__ import annotations

import time

from agent_runtime import Runtime, delegate
from agent_runtime.context import make_transform
from agent_runtime.events import (
    AgentEnd,
    Canceled,
    MessageUpdate,
    ProviderRetry,
    ToolExecutionEnd,
)
from agent_runtime.llm import OpenAICompatibleModel
from agent_runtime.loop import RetryPolicy, validate_transcript
from agent_runtime.messages import AssistantMessage, ToolResultMessage
from agent_runtime.tools import tool
from tests.live.helpers import SECONDS

ABORT_SECONDS = 0.1
PANGRAM = "The quick brown fox jumps over the lazy dog. "


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def final_answer(messages: list[object]) -> AssistantMessage:
    last = messages[-1]
    assert isinstance(last, AssistantMessage) and not last.tool_calls
    assert last.stop_reason in ("stop", "length")
    return last


def test_a_forced_tool_is_called_and_the_run_ends_with_an_answer(
    runtime: Runtime, model: OpenAICompatibleModel
) -> None:
    agent = runtime.start_agent(
        ("live", "main", 0),
        model=model,
        tools=[add],
        tool_choice="add",
        temperature=0.0,
        max_output_tokens=48,
        max_tool_turns=3,
    )
    with agent.subscribe() as sub:
        result = agent.run("What is 2 plus 3? Use the add tool.", timeout=SECONDS)
        events = list(sub.until_end(timeout=SECONDS))
    ends = [e for e in events if isinstance(e, ToolExecutionEnd)]
    assert ends and ends[0].name == "add" and not ends[0].is_error
    call = next(m for m in result.new_messages if isinstance(m, AssistantMessage)).tool_calls[0]
    results = [m for m in result.new_messages if isinstance(m, ToolResultMessage)]
    assert results[0].text == str(call.arguments["a"] + call.arguments["b"])  # the tool ran
    final_answer(result.new_messages)
    assert isinstance(events[-1], AgentEnd)
    assert validate_transcript(agent.state().messages) == []


def test_abort_mid_stream_cancels_at_once_and_continue_run_works(
    runtime: Runtime, model: OpenAICompatibleModel
) -> None:
    agent = runtime.start_agent(
        ("live", "main", 0), model=model, temperature=0.8, max_output_tokens=400
    )
    with agent.subscribe() as sub:
        agent.prompt("Write a long story about a dragon who learns to bake bread.")
        for event in sub:
            if isinstance(event, MessageUpdate):
                break  # the answer is streaming
        asked = time.time()
        agent.abort()
        terminal = [e for e in sub.until_end(timeout=SECONDS) if isinstance(e, Canceled)]
    assert terminal and terminal[0].ts - asked < ABORT_SECONDS
    agent.wait_for_idle(timeout=SECONDS)
    assert validate_transcript(agent.state().messages) == []
    agent.continue_run()
    agent.wait_for_idle(timeout=SECONDS)
    final_answer(agent.state().messages)


def test_a_delegated_subagent_answers_its_parent(
    runtime: Runtime, model: OpenAICompatibleModel
) -> None:
    helper = delegate(["helper"], model=model, temperature=0.0, max_output_tokens=32)
    role = helper.spec().parameters["properties"]["role"]
    assert role["enum"] == ["helper"]  # what the server's grammar holds the model to
    parent = runtime.start_agent(
        ("live", "main", 0),
        model=model,
        tools=[helper],
        tool_choice="delegate",
        temperature=0.0,
        max_output_tokens=64,
        max_tool_turns=1,
    )
    with parent.subscribe() as sub:
        result = parent.run("Ask the helper to name three fruits.", timeout=SECONDS)
        events = list(sub.until_end(timeout=SECONDS))
    (end,) = [e for e in events if isinstance(e, ToolExecutionEnd) and e.agent == parent.key]
    assert end.name == "delegate" and not end.is_error, end.result
    assert end.result.details["subagent"] == ["live", "helper", 0]
    assert any(e.agent is not None and e.agent.role == "helper" for e in events)
    (answer,) = [m for m in result.new_messages if isinstance(m, ToolResultMessage)]
    assert answer.text.strip() and answer.text != "(no answer)"


def test_an_overflowing_history_is_shrunk_once_and_the_prompt_answered(
    runtime: Runtime, model: OpenAICompatibleModel, n_ctx: int
) -> None:
    """Earlier prompts of ~600 tokens each fill the window; the transform keeps them all
    (14,000 characters) until the server refuses, then keeps half (7,000) and the call
    succeeds."""
    agent = runtime.start_agent(
        ("live", "main", 0),
        model=model,
        temperature=0.0,
        max_output_tokens=8,
        retry=RetryPolicy(max_retries=0),
        context_transform=make_transform(max_chars=14_000),
    )
    chunk = PANGRAM * (n_ctx * 3 // 100)  # ~10 tokens a sentence: ~600 tokens with n_ctx 2048
    for n in range(3):
        agent.run(f"Part {n}: {chunk}Reply with OK.", timeout=SECONDS)
    with agent.subscribe() as sub:
        result = agent.run(f"Part 3: {chunk}Reply with OK.", timeout=SECONDS)
        events = list(sub.until_end(timeout=SECONDS))
    retries = [e for e in events if isinstance(e, ProviderRetry)]
    assert len(retries) == 1 and "context_length_exceeded" in retries[0].error
    final_answer(result.new_messages)
