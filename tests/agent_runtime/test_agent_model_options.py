"""Agent options for each model call: tool_choice, temperature, max_output_tokens, and
context_transform with its one retry of a context overflow (issue 15, DESIGN.md 7)."""

from __future__ import annotations

from typing import Any

import pytest

from agent_runtime import RunFailed, Runtime
from agent_runtime.context import make_transform
from agent_runtime.events import ProviderRetry, ProviderRetryEnd
from agent_runtime.llm import ContextLengthExceededError, openai_compatible
from agent_runtime.loop import RetryPolicy
from agent_runtime.messages import Message, ToolCall, UserMessage
from agent_runtime.testing import MockProviderServer, ScriptedModel, ScriptedTurn
from agent_runtime.tools import tool

NO_RETRY = RetryPolicy(max_retries=0)


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


# -- tool_choice, temperature, max_output_tokens -----------------------------------------------


def test_call_options_reach_every_model_call(runtime: Runtime) -> None:
    model = ScriptedModel([ScriptedTurn(tool_calls=[ToolCall(id="c1", name="echo")]), "done"])
    agent = runtime.start_agent(
        ("s", "main", 0),
        model=model,
        tools=[echo],
        tool_choice="echo",
        temperature=0.0,
        max_output_tokens=64,
    )
    assert agent.run("go", timeout=10).text == "done"
    first, second = model.requests
    assert (first.tool_choice, first.temperature, first.max_output_tokens) == ("echo", 0.0, 64)
    assert (second.temperature, second.max_output_tokens) == (0.0, 64)


def test_a_forced_tool_choice_becomes_auto_once_the_tool_was_called(runtime: Runtime) -> None:
    calls = [ScriptedTurn(tool_calls=[ToolCall(id=f"c{n}", name="echo")]) for n in (1, 2)]
    model = ScriptedModel([calls[0], "done", calls[1], "done again"])
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[echo], tool_choice="echo")
    agent.run("go", timeout=10)
    agent.run("and again", timeout=10)
    assert [r.tool_choice for r in model.requests] == ["echo", "auto", "echo", "auto"]


@pytest.mark.parametrize(
    ("options", "error", "named"),
    [
        ({"tool_choice": 3}, ValueError, "tool_choice"),
        ({"tool_choice": ""}, ValueError, "tool_choice"),
        ({"tool_choice": "missing"}, ValueError, r"tool_choice 'missing' names no tool.*echo"),
        ({"temperature": -0.5}, ValueError, "temperature"),
        ({"temperature": "0.5"}, ValueError, "temperature"),
        ({"temperature": True}, TypeError, "temperature must be a number"),
        ({"temperature": float("nan")}, ValueError, "temperature"),
        ({"max_output_tokens": 0}, ValueError, "max_output_tokens"),
        ({"max_output_tokens": 1.5}, ValueError, "max_output_tokens"),
        ({"context_transform": 5}, TypeError, "context_transform must be a callable"),
    ],
)
def test_bad_call_options_are_rejected_by_name(
    runtime: Runtime, options: dict[str, Any], error: type[Exception], named: str
) -> None:
    with pytest.raises(error, match=named):
        runtime.start_agent(("s", "main", 0), model=ScriptedModel(), tools=[echo], **options)
    assert runtime.registry.count() == 0


def test_the_forced_tool_cannot_be_removed_by_set_tools(runtime: Runtime) -> None:
    agent = runtime.start_agent(
        ("s", "main", 0), model=ScriptedModel(), tools=[echo], tool_choice="echo"
    )
    with pytest.raises(ValueError, match="tool_choice 'echo' names no tool"):
        agent.set_tools([])
    assert [t.name for t in agent.state().tools] == ["echo"]


def test_modes_of_tool_choice_need_no_tool_of_that_name(runtime: Runtime) -> None:
    for index, mode in enumerate(("auto", "none", "required")):
        runtime.start_agent(("s", "main", index), model=ScriptedModel(), tool_choice=mode)


# -- context_transform ------------------------------------------------------------------------


def test_the_context_transform_is_applied_before_every_model_call(runtime: Runtime) -> None:
    seen: list[int] = []

    def last_two(messages: list[Message]) -> list[Message]:
        seen.append(len(messages))
        return messages[-2:] if len(messages) > 2 else messages

    model = ScriptedModel(["one", "two", "three"])
    agent = runtime.start_agent(("s", "main", 0), model=model, context_transform=last_two)
    for text in ("a", "b", "c"):
        agent.run(text, timeout=10)
    assert seen == [1, 3, 5]
    assert [len(r.messages) for r in model.requests] == [1, 2, 2]


def chatty_history(agent: Any, server: MockProviderServer) -> None:
    """Three earlier exchanges of about 400 characters each."""
    for n in range(3):
        server.enqueue(f"answer {n} " + "a" * 200)
        agent.run(f"question {n} " + "q" * 200, timeout=10)


def overflowing_agent(runtime: Runtime, server: MockProviderServer, **options: Any) -> Any:
    model = openai_compatible(server.base_url("openai"), "m")
    return runtime.start_agent(("s", "main", 0), model=model, retry=NO_RETRY, **options)


@pytest.mark.parametrize("dialect", ["openai", "llama_cpp"])
def test_an_overflow_is_retried_once_with_half_the_budget(runtime: Runtime, dialect: Any) -> None:
    with MockProviderServer(dialect=dialect) as server:
        agent = overflowing_agent(runtime, server, context_transform=make_transform(max_chars=2000))
        chatty_history(agent, server)
        server.max_request_chars = 1500  # the history (~1,700 characters of JSON) no longer fits
        server.enqueue("short answer")
        with agent.subscribe() as sub:
            result = agent.run("last question", timeout=10)
            events = list(sub.until_end(timeout=10))
    assert result.text == "short answer"
    retries = [e for e in events if isinstance(e, ProviderRetry)]
    assert len(retries) == 1 and retries[0].delay == 0.0
    assert "context_length_exceeded" in retries[0].error
    assert [e.outcome for e in events if isinstance(e, ProviderRetryEnd)] == ["succeeded"]
    retried = server.requests[-1].json["messages"]
    assert retried[-1]["content"] == "last question"
    assert len(retried) < len(server.requests[-2].json["messages"])


def test_without_a_context_transform_an_overflow_fails_without_a_retry(runtime: Runtime) -> None:
    with MockProviderServer() as server:
        agent = overflowing_agent(runtime, server)
        chatty_history(agent, server)
        server.max_request_chars = 1500
        sent = len(server.requests)
        with pytest.raises(RunFailed, match="context_length_exceeded"):
            agent.run("last question", timeout=10)
        with pytest.raises(RunFailed, match="context_length_exceeded"):
            agent.run("every later prompt fails too", timeout=10)
    assert len(server.requests) == sent + 2


def test_the_overflow_retry_happens_once(runtime: Runtime) -> None:
    with MockProviderServer() as server:
        agent = overflowing_agent(runtime, server, context_transform=make_transform(max_chars=2000))
        chatty_history(agent, server)
        server.max_request_chars = 100  # not even half the budget fits
        sent = len(server.requests)
        with pytest.raises(RunFailed, match="context_length_exceeded"):
            agent.run("last question", timeout=10)
    assert len(server.requests) == sent + 2


def test_a_transform_without_a_budget_is_halved_by_truncation(runtime: Runtime) -> None:
    model = ScriptedModel([ScriptedTurn(error=ContextLengthExceededError("too long")), "fits"])

    def unchanged(messages: list[Message]) -> list[Message]:
        return messages

    history: list[Message] = [UserMessage(content=f"old {n} " + "x" * 100) for n in range(4)]
    agent = runtime.start_agent(
        ("s", "main", 0), model=model, retry=NO_RETRY, context_transform=unchanged
    )
    assert agent.run([*history, UserMessage(content="new")], timeout=10).text == "fits"
    first, second = model.requests
    assert len(first.messages) == 5
    assert second.messages[-1] == first.messages[-1] and len(second.messages) == 2
