"""The loop's fixed contract: API shapes and defaults, event order, boundaries, retry rules."""

from __future__ import annotations

import inspect
import threading
import time

import pytest

import agent_runtime
from agent_runtime import loop
from agent_runtime.events import (
    Canceled,
    Error,
    ProviderRetry,
    ProviderRetryEnd,
    ToolExecutionEnd,
)
from agent_runtime.llm import (
    AuthenticationError,
    ContextLengthExceededError,
    InvalidRequestError,
    LLMError,
    ProviderError,
    RateLimitError,
)
from agent_runtime.loop import AgentContext, LoopConfig, RetryPolicy
from agent_runtime.loop._turn import retry_delay
from agent_runtime.messages import Message, ToolResultMessage, UserMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn
from agent_runtime.tools import ToolContext, tool
from tests.agent_runtime.loop.helpers import call, calls_turn, committed, drive, names, results_of

FAST_RETRY = RetryPolicy(base_delay=0.001, max_delay=0.01, jitter=0.0)


def params(fn: object) -> list[tuple[str, str, object]]:
    signature = inspect.signature(fn)  # type: ignore[arg-type]
    return [(p.name, p.kind.name, p.default) for p in signature.parameters.values()]


def test_the_loop_functions_have_the_contract_signatures() -> None:
    empty = inspect.Parameter.empty
    assert params(loop.run) == [
        ("prompts", "POSITIONAL_OR_KEYWORD", empty),
        ("context", "POSITIONAL_OR_KEYWORD", empty),
        ("config", "POSITIONAL_OR_KEYWORD", empty),
        ("signal", "POSITIONAL_OR_KEYWORD", None),
    ]
    assert params(loop.continue_run) == [
        ("context", "POSITIONAL_OR_KEYWORD", empty),
        ("config", "POSITIONAL_OR_KEYWORD", empty),
        ("signal", "POSITIONAL_OR_KEYWORD", None),
    ]
    assert params(loop.stream)[:5] == [
        *params(loop.run),
        ("runtime", "KEYWORD_ONLY", empty),
    ]
    assert params(loop.stream_continue)[:4] == [
        *params(loop.continue_run),
        ("runtime", "KEYWORD_ONLY", empty),
    ]


def test_loop_config_defaults_are_the_contract_defaults() -> None:
    model = ScriptedModel([])
    config = LoopConfig(model=model)
    assert config.model is model
    assert config.max_tool_concurrency == 8
    assert config.max_tool_turns == 25
    assert config.tool_timeout is None
    assert config.retry == RetryPolicy()
    assert config.abort_grace == 0.25
    assert config.get_steering_messages is None and config.get_follow_up_messages is None
    assert config.convert_to_llm is None and config.transform_context is None
    assert (config.temperature, config.max_output_tokens, config.reasoning) == (None, None, None)


def test_retry_policy_defaults_and_its_top_level_import() -> None:
    assert agent_runtime.RetryPolicy is RetryPolicy
    policy = RetryPolicy()
    assert (policy.max_retries, policy.base_delay, policy.max_delay, policy.max_retry_after) == (
        3,
        2.0,
        30.0,
        120.0,
    )
    custom = RetryPolicy(max_retries=1, base_delay=0.5, max_delay=1.0, max_retry_after=2.0)
    assert custom.max_retry_after == 2.0


def test_agent_context_holds_the_system_prompt_messages_and_tools() -> None:
    context = AgentContext(system_prompt="s", messages=[UserMessage(content="q")], tools=[])
    assert (context.system_prompt, len(context.messages), list(context.tools)) == ("s", 1, [])
    assert AgentContext().messages == []


# -- order of events ---------------------------------------------------------------------------


def test_a_tool_turn_emits_events_in_contract_order() -> None:
    @tool
    def work(ctx: ToolContext) -> str:
        """Reports progress once."""
        ctx.update("half")
        return "done"

    model = ScriptedModel([calls_turn(call("w", "work")), ScriptedTurn(chunks=["o", "k"])])
    events = drive(model, [work])
    assert names(events) == [
        "AgentStart",
        "TurnStart",
        "MessageStart",  # the prompt
        "MessageEnd",
        "MessageStart",  # the answer with the tool call
        "MessageUpdate",
        "MessageEnd",
        "ToolExecutionStart",
        "ToolExecutionUpdate",
        "ToolExecutionEnd",
        "MessageStart",  # the tool result
        "MessageEnd",
        "TurnEnd",
        "TurnStart",
        "MessageStart",  # the final answer
        "MessageUpdate",
        "MessageUpdate",
        "MessageEnd",
        "TurnEnd",
        "AgentEnd",
    ]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def test_results_enter_the_context_in_call_order_when_later_calls_finish_first() -> None:
    @tool(parallel_safe=True)
    def nap(seconds: float) -> float:
        """Sleeps."""
        time.sleep(seconds)
        return seconds

    calls = [call("slow", "nap", seconds=0.15), call("mid", "nap", seconds=0.08)]
    calls.append(call("fast", "nap", seconds=0.01))
    model = ScriptedModel([calls_turn(*calls), "ok"])
    events = drive(model, [nap])
    finished = [e.tool_call_id for e in events if isinstance(e, ToolExecutionEnd)]
    assert finished == ["fast", "mid", "slow"]
    assert [r.tool_call_id for r in results_of(events)] == ["slow", "mid", "fast"]
    sent = [m.tool_call_id for m in model.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert sent == ["slow", "mid", "fast"]


# -- steering boundaries -------------------------------------------------------------------------


def test_steering_is_polled_at_every_tool_boundary_and_after_a_text_only_turn() -> None:
    finished: list[str] = []
    lock = threading.Lock()

    def record(name: str) -> str:
        with lock:
            finished.append(name)
        return name

    @tool(parallel_safe=True)
    def read(name: str) -> str:
        """Parallel-safe."""
        return record(name)

    @tool
    def write(name: str) -> str:
        """Sequential."""
        return record(name)

    polls: list[set[str]] = []

    def steering() -> list[Message]:
        with lock:
            polls.append(set(finished))
        return []

    calls = [call("r1", "read", name="r1"), call("r2", "read", name="r2")]
    calls += [call("w1", "write", name="w1"), call("w2", "write", name="w2")]
    drive(ScriptedModel([calls_turn(*calls), "ok"]), [read, write], get_steering_messages=steering)
    everything = {"r1", "r2", "w1", "w2"}
    assert polls == [
        set(),  # before the first call
        {"r1", "r2"},  # after the parallel group, before w1
        {"r1", "r2", "w1"},  # after w1, before w2
        everything,  # after the batch
        everything,  # after the text-only answer
    ]


def test_steering_during_a_parallel_group_lets_the_started_calls_finish() -> None:
    queue: list[Message] = []

    @tool(parallel_safe=True)
    def read(name: str) -> str:
        """Parallel-safe; the first one brings a steering message."""
        if name == "r1":
            queue.append(UserMessage(content="stop that"))
        time.sleep(0.02)
        return name

    @tool
    def write(name: str) -> str:
        """Sequential."""
        return name

    def steering() -> list[Message]:
        taken = list(queue)
        queue.clear()
        return taken

    calls = [call("r1", "read", name="r1"), call("r2", "read", name="r2")]
    calls.append(call("w", "write", name="w"))
    model = ScriptedModel([calls_turn(*calls), "ok"])
    events = drive(model, [read, write], get_steering_messages=steering)
    results = {r.tool_call_id: r for r in results_of(events)}
    assert results["r1"].text == "r1" and results["r2"].text == "r2"
    assert results["w"].details == {"outcome": "skipped"} and results["w"].is_error
    assert model.requests[1].messages[-1].text == "stop that"  # type: ignore[union-attr]


def test_the_loop_delivers_exactly_what_each_steering_call_returns() -> None:
    queue: list[Message] = [UserMessage(content=f"s{i}") for i in range(3)]

    def one_at_a_time() -> list[Message]:
        return [queue.pop(0)] if queue else []

    model = ScriptedModel(["a", "b", "c"])
    drive(model, get_steering_messages=one_at_a_time)
    steers = [
        [m.text for m in r.messages if isinstance(m, UserMessage) and m.text.startswith("s")]
        for r in model.requests
    ]
    assert steers == [["s0"], ["s0", "s1"], ["s0", "s1", "s2"]]  # one new message per call

    queue[:] = [UserMessage(content=f"s{i}") for i in range(3)]

    def all_at_once() -> list[Message]:
        taken = list(queue)
        queue.clear()
        return taken

    model = ScriptedModel(["a"])
    drive(model, get_steering_messages=all_at_once)
    assert [m.text for m in model.requests[0].messages] == ["go", "s0", "s1", "s2"]  # type: ignore[union-attr]


# -- transcript checks ---------------------------------------------------------------------------


def test_the_transcript_is_validated_before_every_model_call() -> None:
    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    def drop_results(messages: list[Message]) -> list[Message]:
        return [m for m in messages if not isinstance(m, ToolResultMessage)]

    model = ScriptedModel([calls_turn(call("c1", "echo", text="x")), "never"])
    events = drive(model, [echo], transform_context=drop_results)
    end = events[-1]
    assert isinstance(end, Error) and end.reason.startswith("invalid_transcript: ")
    assert "unpaired tool call: 'c1' (echo)" in end.reason
    assert model.call_count == 1  # the second call never reached the provider


# -- provider retry ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        AuthenticationError("bad key"),
        InvalidRequestError("bad request"),
        ContextLengthExceededError("too long"),
        AuthenticationError("bad key", retryable=True),
        ContextLengthExceededError("too long", retryable=True),
    ],
    ids=lambda e: f"{type(e).__name__}-retryable={e.retryable}",
)
def test_auth_invalid_request_and_context_overflow_are_never_retried(error: LLMError) -> None:
    model = ScriptedModel([ScriptedTurn(error=error), "never"])
    events = drive(model, retry=FAST_RETRY)
    assert isinstance(events[-1], Error) and events[-1].reason.startswith(error.code)
    assert model.call_count == 1
    assert not any(isinstance(e, ProviderRetry | ProviderRetryEnd) for e in events)


def test_each_retry_wait_is_announced_and_paired_with_its_outcome() -> None:
    script = [ScriptedTurn(error=ProviderError("e1")), ScriptedTurn(error=ProviderError("e2"))]
    model = ScriptedModel([*script, "ok"])
    events = drive(model, retry=FAST_RETRY)
    retry_events = [
        (type(e).__name__, e.attempt, getattr(e, "outcome", None))
        for e in events
        if isinstance(e, ProviderRetry | ProviderRetryEnd)
    ]
    assert retry_events == [
        ("ProviderRetry", 1, None),
        ("ProviderRetryEnd", 1, "failed"),
        ("ProviderRetry", 2, None),
        ("ProviderRetryEnd", 2, "succeeded"),
    ]
    assert [m.text for m in committed(events)] == ["go", "ok"]  # type: ignore[union-attr]


@pytest.mark.timing
def test_a_long_retry_after_is_capped_at_120_seconds_and_the_wait_ends_on_abort() -> None:
    model = ScriptedModel([ScriptedTurn(error=RateLimitError("slow down", retry_after=900)), "x"])
    started = time.monotonic()
    events = drive(model, abort_when=lambda e: isinstance(e, ProviderRetry))
    elapsed = time.monotonic() - started
    retry = next(e for e in events if isinstance(e, ProviderRetry))
    assert retry.delay == 120.0  # the default RetryPolicy's max_retry_after
    assert elapsed < 0.5
    assert isinstance(events[-1], Canceled)
    assert [e.outcome for e in events if isinstance(e, ProviderRetryEnd)] == ["aborted"]


def test_backoff_grows_exponentially_and_jitter_never_passes_the_cap() -> None:
    policy = RetryPolicy(base_delay=2.0, max_delay=30.0, jitter=0.5)
    error = ProviderError("down")
    for attempt in range(1, 8):
        delays = [retry_delay(attempt, error, policy) for _ in range(200)]
        expected = min(30.0, 2.0 * 2 ** (attempt - 1))
        assert all(expected * 0.5 <= d <= min(expected * 1.5, 30.0) for d in delays)
    hinted = RateLimitError("slow", retry_after=45.0)
    assert retry_delay(1, hinted, policy) == 45.0  # a longer hint wins over the cap
