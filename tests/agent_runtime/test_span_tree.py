"""The spans of runs, recorded by the SDK's in-memory exporter in a subprocess each scenario
(the global provider can be set once per process): `invoke_agent {role}` > agent.turn >
`chat {model}` / `execute_tool {tool}` as the GenAI semantic conventions name them, a
delegated subagent's run under the tool span that started it (DESIGN.md 10), attribute names,
error status, retries and aborts as span events, and no content."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.agent_runtime.otel_capture import Captured, run_traced

_TREE = """
from agent_runtime import Runtime, delegate, tool
from agent_runtime.config import RuntimeConfig
from agent_runtime.messages import ToolCall
from agent_runtime.testing import ScriptedModel, ScriptedTurn

@tool
def lookup(query: str) -> str:
    \"\"\"Look a thing up.\"\"\"
    return "secret-result for " + query

calls = [
    ToolCall(id="t1", name="lookup", arguments={"query": "secret-argument"}),
    ToolCall(id="t2", name="delegate", arguments={"role": "helper", "task": "secret-task"}),
]
helper = delegate(["helper"], model=ScriptedModel(["secret-helper-answer"]))
with Runtime.start(RuntimeConfig()) as runtime:
    top = runtime.start_agent(
        ("s", "top", 0),
        system_prompt="secret-system-prompt",
        model=ScriptedModel([ScriptedTurn(tool_calls=calls), "secret-answer"]),
        tools=[lookup, helper],
    )
    FACTS["text"] = top.run("secret-prompt", timeout=30).text
"""

_FAILURES = """
from agent_runtime import RetryPolicy, RunFailed, Runtime, tool
from agent_runtime.config import RuntimeConfig
from agent_runtime.llm import AuthenticationError, ProviderError, RateLimitError
from agent_runtime.messages import ToolCall
from agent_runtime.testing import ScriptedModel, ScriptedTurn

@tool
def boom() -> str:
    \"\"\"Always fails.\"\"\"
    raise ValueError("it broke")

flaky_turns = [
    ScriptedTurn(error=RateLimitError("slow down")),  # fails before its first chunk
    ScriptedTurn(text="half an answer", error=ProviderError("overloaded")),  # after chunks
    ScriptedTurn(tool_calls=[ToolCall(id="b1", name="boom")]),
    "recovered",
]
with Runtime.start(RuntimeConfig()) as runtime:
    flaky = runtime.start_agent(
        ("s", "flaky", 0),
        model=ScriptedModel(flaky_turns),
        tools=[boom],
        retry=RetryPolicy(base_delay=0.01, max_delay=0.01),
    )
    FACTS["flaky"] = flaky.run("go", timeout=30).text
    locked = runtime.start_agent(
        ("s", "locked", 0), model=ScriptedModel([ScriptedTurn(error=AuthenticationError("no"))])
    )
    try:
        locked.run("go", timeout=30)
    except RunFailed as failed:
        FACTS["locked"] = failed.reason
"""

_ABORT = """
import threading
from agent_runtime import Runtime, tool
from agent_runtime.config import RuntimeConfig
from agent_runtime.messages import ToolCall
from agent_runtime.testing import ScriptedModel, ScriptedTurn

started, release = threading.Event(), threading.Event()

def call(call_id):
    return ToolCall(id=call_id, name="stuck")

@tool
def stuck() -> str:
    \"\"\"Ignores aborts.\"\"\"
    started.set()
    release.wait(30)
    return "late"

with Runtime.start(RuntimeConfig()) as runtime:
    agent = runtime.start_agent(
        ("s", "stuck", 0),
        model=ScriptedModel([ScriptedTurn(tool_calls=[call("x1"), call("x2")])]),
        tools=[stuck],
        abort_grace=0.01,
    )
    agent.prompt("go")
    assert started.wait(30)
    agent.abort("user_abort")
    agent.wait_for_idle(30)
    release.set()
"""


@pytest.fixture(scope="module")
def tree() -> Captured:
    return run_traced(_TREE)


@pytest.fixture(scope="module")
def failures() -> Captured:
    return run_traced(_FAILURES)


@pytest.fixture(scope="module")
def aborted() -> Captured:
    return run_traced(_ABORT)


def event_names(span: dict[str, Any]) -> list[str]:
    return [e["name"] for e in span["events"]]


def events_named(span: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [e["attributes"] for e in span["events"] if e["name"] == name]


CHAT = "chat scripted"  # `chat {model}`: every agent here runs a ScriptedModel


def by_start(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(spans, key=lambda s: s["start"])


def test_a_run_with_two_tool_calls_nests_turns_chats_and_tools(tree: Captured) -> None:
    run = tree.one("invoke_agent top")
    assert run["parent_id"] is None
    first, second = by_start(tree.children(run, "agent.turn"))
    assert [first["attributes"]["agent.turn"], second["attributes"]["agent.turn"]] == [1, 2]
    assert len(tree.children(first, CHAT)) == len(tree.children(second, CHAT))
    assert len(tree.children(second, CHAT)) == 1
    tools = by_start([s for s in tree.children(first) if s["name"].startswith("execute_tool ")])
    assert [t["name"] for t in tools] == ["execute_tool lookup", "execute_tool delegate"]
    assert [t["attributes"]["gen_ai.tool.name"] for t in tools] == ["lookup", "delegate"]
    assert tree.children(second) == tree.children(second, CHAT)  # no tool
    assert run["attributes"]["agent.outcome"] == "completed" and run["status"] == "UNSET"


def test_a_delegated_subagents_run_is_a_child_of_the_delegating_tool_span(
    tree: Captured,
) -> None:
    tool_span = tree.one("execute_tool delegate")
    helper = tree.one("invoke_agent helper")
    assert helper["parent_id"] == tool_span["span_id"]
    (turn,) = tree.children(helper, "agent.turn")
    assert len(tree.children(turn, CHAT)) == 1
    assert {s["trace_id"] for s in tree.spans} == {helper["trace_id"]}  # one trace


def test_spans_carry_the_genai_and_agent_attribute_names(tree: Captured) -> None:
    run = tree.one("invoke_agent top")
    identity = {"agent.run_id", "agent.session", "agent.role", "agent.index"}
    assert identity | {"gen_ai.operation.name", "agent.outcome"} <= set(run["attributes"])
    assert run["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    chat = tree.children(tree.children(run, "agent.turn")[0], CHAT)[0]
    assert {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "scripted",
    }.items() <= chat["attributes"].items()
    assert "gen_ai.system" not in chat["attributes"]  # deprecated by the conventions
    assert {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "top",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "scripted",
    }.items() <= run["attributes"].items()
    usage = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")
    assert all(chat["attributes"][name] > 0 for name in usage)
    assert chat["attributes"]["gen_ai.response.finish_reasons"] == ["tool_use"]
    lookup = tree.one("execute_tool lookup")
    attrs = lookup["attributes"]
    assert {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "tool.outcome": "ok",
    }.items() <= attrs.items()
    assert attrs["gen_ai.tool.call.id"].startswith("t1")  # the provider's id, made unique
    assert "error.type" not in attrs and lookup["status"] == "UNSET"
    assert "tool.name" not in attrs and "tool.call_id" not in attrs  # the conventions' names
    assert identity <= set(attrs)


def test_introspection_events_mark_the_loop_its_turns_and_tool_uses(tree: Captured) -> None:
    run = tree.one("invoke_agent top")
    assert event_names(run) == ["agent.loop.started", "agent.loop.ended"]
    (ended,) = events_named(run, "agent.loop.ended")
    assert ended["outcome"] == "completed"
    assert (ended["turns"], ended["tool_calls"]) == (2, 2)
    assert ended["input_tokens"] > 0 and ended["output_tokens"] > 0 and ended["duration_s"] > 0
    first, second = by_start(tree.children(run, "agent.turn"))
    (observed,) = events_named(first, "agent.turn.observed")
    assert (observed["turn"], observed["tool_calls"], observed["stop_reason"]) == (1, 2, "tool_use")
    assert events_named(second, "agent.turn.observed")[0]["stop_reason"] == "stop"
    for tool_span in tree.named("execute_tool lookup") + tree.named("execute_tool delegate"):
        (use,) = events_named(tool_span, "tool.use.observed")
        assert use["gen_ai.tool.name"] == tool_span["attributes"]["gen_ai.tool.name"]
        assert use["outcome"] == "ok" and use["is_error"] is False


def test_no_span_carries_prompt_answer_or_tool_content(tree: Captured) -> None:
    assert tree.facts["text"] == "secret-answer"  # the content existed
    recorded = json.dumps([tree.spans, tree.metrics])
    assert "secret" not in recorded


def test_a_failed_model_call_is_an_error_span_and_its_retry_a_span_event(
    failures: Captured,
) -> None:
    run = failures.one("invoke_agent flaky")
    turn = by_start(failures.children(run, "agent.turn"))[0]
    chats = by_start(failures.children(turn, CHAT))
    assert [c["status"] for c in chats] == ["ERROR", "ERROR", "UNSET"]
    assert [c["attributes"].get("error.type") for c in chats] == [
        "rate_limited",
        "provider_error",
        None,
    ]
    retries = events_named(turn, "agent.provider.retry")
    assert [(r["attempt"], r["error.type"]) for r in retries] == [
        (1, "rate_limited"),
        (2, "provider_error"),
    ]
    assert events_named(turn, "agent.provider.retry_end")[-1]["outcome"] == "succeeded"
    assert run["status"] == "UNSET" and failures.facts["flaky"] == "recovered"


def test_a_tool_error_sets_the_tool_spans_error_status(failures: Captured) -> None:
    boom = failures.one("execute_tool boom")
    assert boom["status"] == "ERROR"
    assert boom["attributes"]["tool.outcome"] == "error"
    assert boom["attributes"]["error.type"] == "ValueError"  # the exception it raised
    assert events_named(boom, "tool.use.observed")[0]["is_error"] is True


def test_a_failed_run_has_error_status_and_type(failures: Captured) -> None:
    run = failures.one("invoke_agent locked")
    assert run["status"] == "ERROR" and run["description"] == failures.facts["locked"]
    assert run["attributes"]["error.type"] == "authentication_failed"
    assert run["attributes"]["agent.outcome"] == "failed"
    (turn,) = failures.children(run, "agent.turn")
    (chat,) = failures.children(turn, CHAT)
    assert chat["status"] == "ERROR"
    assert chat["attributes"]["error.type"] == "authentication_failed"
    assert events_named(run, "agent.loop.ended")[0]["outcome"] == "failed"


def test_an_abort_is_a_span_event_of_the_run_not_an_error(aborted: Captured) -> None:
    run = aborted.one("invoke_agent stuck")
    assert events_named(run, "agent.aborted") == [{"reason": "user_abort"}]
    assert run["status"] == "UNSET" and run["attributes"]["agent.outcome"] == "canceled"
    ended = events_named(run, "agent.loop.ended")[0]
    assert (ended["outcome"], ended["reason"]) == ("canceled", "user_abort")
    stuck = aborted.one("execute_tool stuck")  # x2 never started
    assert stuck["attributes"]["tool.outcome"] == "unknown"  # abandoned after abort_grace
    assert stuck["status"] == "UNSET"
    (calls,) = aborted.points("agent.tool_calls")
    assert calls["value"] == 1
