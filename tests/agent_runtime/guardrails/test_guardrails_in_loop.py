"""Guardrails in the bare loop (`LoopConfig(guardrails=...)`): the pairing of calls and results
holds when a guardrail blocks, and an unattached run has its own id in the context."""

from __future__ import annotations

import pytest

from agent_runtime import GuardrailContext, GuardrailResult
from agent_runtime.events import AgentEnd, Error, ToolExecutionEnd, ToolExecutionStart
from agent_runtime.guardrails import Guardrail, RegexGuardrail
from agent_runtime.loop import LoopConfig
from agent_runtime.testing import ScriptedModel
from agent_runtime.tools import tool
from tests.agent_runtime.loop.helpers import call, calls_turn, drive, results_of


@tool
def leak(n: int) -> str:
    """Returns a secret."""
    return f"secret {n}"


@tool
def safe(n: int) -> str:
    """Returns nothing secret."""
    return f"fine {n}"


def test_a_blocked_result_stops_the_later_calls_and_each_call_keeps_one_result() -> None:
    model = ScriptedModel([calls_turn(call("a", "leak", n=1), call("b", "safe", n=2)), "never"])
    guard = RegexGuardrail(keywords=["secret"], at="tool_result")
    events = drive(model, [leak, safe], guardrails=[guard])
    terminal = events[-1]
    assert isinstance(terminal, Error) and terminal.reason.startswith(
        "guardrail: RegexGuardrail at tool_result: "
    )
    started = [e.tool_call_id for e in events if isinstance(e, ToolExecutionStart)]
    ended = [e.tool_call_id for e in events if isinstance(e, ToolExecutionEnd)]
    assert started == ["a"] and ended == ["a", "b"]  # b (not parallel-safe) never ran
    results = results_of(events)
    assert [r.tool_call_id for r in results] == ["a", "b"]
    assert all(r.is_error for r in results)
    assert results[1].details["outcome"] == "not_started"
    assert model.call_count == 1


def test_a_report_only_result_guardrail_lets_the_result_through() -> None:
    model = ScriptedModel([calls_turn(call("a", "leak", n=1)), "ok"])
    guard = RegexGuardrail(keywords=["secret"], at="tool_result", mode="report")
    events = drive(model, [leak], guardrails=[guard])
    assert isinstance(events[-1], AgentEnd)
    (result,) = results_of(events)
    assert not result.is_error and result.content[0].text == "secret 1"  # type: ignore[union-attr]


def test_the_first_blocking_failure_wins_and_report_only_ones_before_it_still_run() -> None:
    seen: list[str] = []

    class Named(Guardrail):
        at = "model_request"

        def __init__(self, name: str, passed: bool, mode: str) -> None:
            self._name, self._passed, self.mode = name, passed, mode  # type: ignore[assignment]

        @property
        def name(self) -> str:
            return self._name

        def check(self, text: str, *, context: GuardrailContext) -> GuardrailResult:
            seen.append(self._name)
            return GuardrailResult(self._passed, f"{self._name} says no")

    guards = [
        Named("first", False, "report"),
        Named("second", False, "block"),
        Named("third", False, "block"),
    ]
    events = drive(ScriptedModel(["x"]), guardrails=guards)
    terminal = events[-1]
    assert isinstance(terminal, Error)
    assert terminal.reason == "guardrail: second at model_request: second says no"
    assert seen == ["first", "second"]


def test_a_bare_run_s_context_has_its_generated_run_id_and_no_agent() -> None:
    contexts: list[GuardrailContext] = []

    class Keep(Guardrail):
        at = "model_response"

        def check(self, text: str, *, context: GuardrailContext) -> GuardrailResult:
            contexts.append(context)
            return GuardrailResult(True)

    events = drive(ScriptedModel(["hi"]), guardrails=[Keep()])
    (context,) = contexts
    assert context.agent is None and context.run_id == events[-1].run_id != ""


def test_loop_config_refuses_a_guardrail_that_is_not_one() -> None:
    with pytest.raises(TypeError, match=r"agent_runtime\.Guardrail instances, not str"):
        LoopConfig(ScriptedModel([]), guardrails=["no secrets"])
