"""Guardrails over real runs: each point blocks (or reports) as the issue says, through
`start_agent(guardrails=...)` on a real Runtime with a ScriptedModel."""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from agent_runtime import (
    Guardrail,
    GuardrailContext,
    GuardrailResult,
    GuardrailTripped,
    RunFailed,
    Runtime,
)
from agent_runtime.events import Error, MessageEnd, ToolExecutionEnd, ToolExecutionStart
from agent_runtime.guardrails import MaxLengthGuardrail, RegexGuardrail
from agent_runtime.guardrails._runner import FINAL_RESULT
from agent_runtime.loop import OUTPUT_TOOL
from agent_runtime.messages import TextContent, ToolCall, ToolResultMessage, UserMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn
from agent_runtime.tools import tool


def text_of(message: ToolResultMessage) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextContent))


@tool
def lookup(city: str) -> str:
    """The weather in `city`."""
    return f"sunny in {city}; the admin password is hunter2"


class Recorder(Guardrail):
    """Passes everything; keeps what it saw."""

    def __init__(self, at: str) -> None:
        self.at = at  # type: ignore[assignment]
        self.seen: list[tuple[str, GuardrailContext]] = []

    async def check(self, text: str, *, context: GuardrailContext) -> GuardrailResult:
        await asyncio.sleep(0)  # an async check is awaited
        self.seen.append((text, context))
        return GuardrailResult(True)


def test_a_blocking_request_guardrail_stops_the_run_before_the_model_is_called(
    runtime: Runtime,
) -> None:
    model = ScriptedModel(["never sent"])
    guard = RegexGuardrail(keywords=["ssn"], at="model_request")
    agent = runtime.start_agent(("s", "main", 0), model=model, guardrails=[guard])
    with pytest.raises(GuardrailTripped) as caught:
        agent.run("my SSN is 123", timeout=10)
    assert isinstance(caught.value, RunFailed)
    assert caught.value.at == "model_request"
    assert caught.value.explanation == "the text matches the keyword 'ssn'"
    assert caught.value.reason.startswith("guardrail: ")
    assert model.call_count == 0


def test_the_terminal_of_a_blocked_run_is_an_error_with_a_guardrail_reason(
    runtime: Runtime,
) -> None:
    guard = RegexGuardrail(r"\bkill\b", at="model_response")
    agent = runtime.start_agent(
        ("s", "main", 0), model=ScriptedModel(["I will kill it"]), guardrails=[guard]
    )
    events = list(agent.stream("go"))
    terminal = events[-1]
    assert isinstance(terminal, Error)
    assert terminal.reason == (
        "guardrail: RegexGuardrail at model_response: the text matches the pattern '\\\\bkill\\\\b'"
    )
    ends = [e for e in events if isinstance(e, MessageEnd)]
    assert ends[-1].message.stop_reason == "error"  # announced, not committed
    assert [type(m) for m in agent.state().messages] == [UserMessage]


def test_a_blocked_response_raises_with_what_the_guardrail_said(runtime: Runtime) -> None:
    guard = MaxLengthGuardrail(5, at="model_response")
    agent = runtime.start_agent(
        ("s", "main", 0), model=ScriptedModel(["far too long"]), guardrails=[guard]
    )
    with pytest.raises(GuardrailTripped) as caught:
        agent.run("hi", timeout=10)
    assert caught.value.at == "model_response"
    assert caught.value.explanation == "the text is 12 characters long, over the limit of 5"
    assert caught.value.guardrail == "MaxLengthGuardrail"


def test_a_blocked_tool_call_is_not_run_and_the_model_reads_why(runtime: Runtime) -> None:
    calls: list[str] = []

    @tool
    def delete(path: str) -> str:
        """Delete `path`."""
        calls.append(path)
        return "deleted"

    model = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[ToolCall(id="c1", name="delete", arguments={"path": "/"})]),
            "I could not delete it.",
        ]
    )
    guard = RegexGuardrail(r'^delete .*"path": "/"', at="tool_call")
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[delete], guardrails=[guard])
    events = list(agent.stream("wipe the disk"))
    assert calls == []
    assert not any(isinstance(e, ToolExecutionStart) for e in events)
    (end,) = [e for e in events if isinstance(e, ToolExecutionEnd)]
    assert end.is_error and end.result.details["outcome"] == "blocked"
    sent = model.requests[1].messages[-1]
    assert isinstance(sent, ToolResultMessage) and sent.is_error
    assert "RegexGuardrail" in text_of(sent) and "was not run" in text_of(sent)
    assert agent.state().messages[-1].content[0].text == "I could not delete it."  # type: ignore[union-attr]


def test_a_tool_call_guardrail_sees_the_name_and_json_arguments(runtime: Runtime) -> None:
    recorder = Recorder("tool_call")
    model = ScriptedModel(
        [
            ScriptedTurn(
                tool_calls=[ToolCall(id="c1", name="lookup", arguments={"city": "Zürich"})]
            ),
            "done",
        ]
    )
    agent = runtime.start_agent(
        ("s", "main", 0), model=model, tools=[lookup], guardrails=[recorder]
    )
    result = agent.run("weather?", timeout=10)
    ((text, context),) = recorder.seen
    assert text == 'lookup {"city": "Zürich"}'
    assert context.at == "tool_call" and context.tool_name == "lookup"
    assert context.arguments == {"city": "Zürich"}
    assert context.agent == ("s", "main", 0) and context.run_id == result.run_id


def test_a_blocked_tool_result_fails_the_run_and_never_reaches_the_model(
    runtime: Runtime,
) -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[ToolCall(id="c1", name="lookup", arguments={"city": "Oslo"})]),
            "never asked",
        ]
    )
    guard = RegexGuardrail(keywords=["password"], at="tool_result")
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[lookup], guardrails=[guard])
    with pytest.raises(GuardrailTripped) as caught:
        agent.run("weather?", timeout=10)
    assert caught.value.at == "tool_result"
    assert model.call_count == 1
    results = [m for m in agent.state().messages if isinstance(m, ToolResultMessage)]
    assert len(results) == 1 and results[0].is_error  # the call keeps its one result
    assert "hunter2" not in text_of(results[0])


def test_a_request_guardrail_sees_only_what_was_added_since_the_model_answered(
    runtime: Runtime,
) -> None:
    recorder = Recorder("model_request")
    model = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[ToolCall(id="c1", name="lookup", arguments={"city": "Rome"})]),
            "first",
            "second",
        ]
    )
    agent = runtime.start_agent(
        ("s", "main", 0), model=model, tools=[lookup], guardrails=[recorder]
    )
    agent.run("weather in Rome?", timeout=10)
    agent.run("thanks", timeout=10)
    texts = [text for text, _ in recorder.seen]
    assert texts == [
        "weather in Rome?",
        "sunny in Rome; the admin password is hunter2",
        "thanks",
    ]


def test_a_report_only_guardrail_logs_and_lets_the_run_go_on(runtime: Runtime) -> None:
    guard = RegexGuardrail(keywords=["secret"], at="model_response", mode="report")
    agent = runtime.start_agent(
        ("s", "main", 0), model=ScriptedModel(["the secret is 42"]), guardrails=[guard]
    )
    with capture_logs() as logs:
        result = agent.run("tell me", timeout=10)
    assert result.text == "the secret is 42"
    (line,) = [entry for entry in logs if entry["event"] == "guardrail.failed"]
    assert line["guardrail"] == "RegexGuardrail" and line["at"] == "model_response"
    assert line["mode"] == "report" and line["run_id"] == result.run_id
    assert "text" not in line  # telemetry.log_content is off: no content in logs


def test_a_sync_check_works_like_an_async_one(runtime: Runtime) -> None:
    class NoShouting(Guardrail):
        at = "model_request"

        def check(self, text: str, *, context: GuardrailContext) -> GuardrailResult:
            return GuardrailResult(not text.isupper(), "shouting")

    agent = runtime.start_agent(
        ("s", "main", 0), model=ScriptedModel(["ok"]), guardrails=[NoShouting()]
    )
    assert agent.run("hello", timeout=10).text == "ok"
    with pytest.raises(GuardrailTripped, match="shouting"):
        agent.run("HELLO", timeout=10)


def test_a_check_that_raises_blocks_naming_the_exception(runtime: Runtime) -> None:
    class Broken(Guardrail):
        at = "model_request"

        def check(self, text: str, *, context: GuardrailContext) -> GuardrailResult:
            raise RuntimeError("service down")

    agent = runtime.start_agent(
        ("s", "main", 0), model=ScriptedModel(["ok"]), guardrails=[Broken()]
    )
    with pytest.raises(GuardrailTripped) as caught:
        agent.run("hello", timeout=10)
    assert caught.value.explanation == "the check raised RuntimeError: service down"


@pytest.mark.parametrize(
    ("guardrails", "error", "message"),
    [
        ("nope", TypeError, "guardrails must be a list of Guardrails, not str"),
        ([RegexGuardrail], TypeError, "not the class RegexGuardrail"),
        ([object()], TypeError, "agent_runtime.Guardrail instances, not object"),
    ],
)
def test_bad_guardrails_are_refused_at_start_with_a_named_error(
    runtime: Runtime, guardrails: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        runtime.start_agent(("s", "main", 0), model=ScriptedModel([]), guardrails=guardrails)


def test_a_guardrail_with_an_unknown_point_is_refused(runtime: Runtime) -> None:
    class Nowhere(Guardrail):
        at = "model_output"  # type: ignore[assignment]

        def check(self, text: str, *, context: GuardrailContext) -> GuardrailResult:
            return GuardrailResult(True)

    with pytest.raises(ValueError, match="at='model_output' \\(expected one of: model_request"):
        runtime.start_agent(("s", "main", 0), model=ScriptedModel([]), guardrails=[Nowhere()])


def test_arun_raises_guardrail_tripped_too(runtime: Runtime) -> None:
    guard = RegexGuardrail(keywords=["ssn"], at="model_request")
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["x"]), guardrails=[guard])

    async def go() -> None:
        await agent.arun("my ssn", timeout=10)

    with pytest.raises(GuardrailTripped) as caught:
        asyncio.run(go())
    assert caught.value.at == "model_request"


def test_a_typed_answer_through_the_final_result_tool_is_checked_as_the_response(
    runtime: Runtime,
) -> None:
    answer = ToolCall(id="o1", name=OUTPUT_TOOL, arguments={"response": "the password is hunter2"})
    model = ScriptedModel([ScriptedTurn(tool_calls=[answer])], capabilities=["tools", "streaming"])
    guard = RegexGuardrail(keywords=["hunter2"], at="model_response")
    agent = runtime.start_agent(("s", "main", 0), model=model, guardrails=[guard])
    with pytest.raises(GuardrailTripped) as tripped:
        agent.run("the secret?", timeout=10, output_type=str)
    assert tripped.value.at == "model_response"
    assert FINAL_RESULT == OUTPUT_TOOL  # the guardrails' copy of the loop's name


def test_a_blocked_tool_call_is_counted_as_blocked(runtime: Runtime) -> None:
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[ToolCall(id="c1", name="lookup", arguments={"city": "x"})]), "ok"]
    )
    guard = RegexGuardrail(keywords=["lookup"], at="tool_call")
    agent = runtime.start_agent(("s", "main", 0), model=model, tools=[lookup], guardrails=[guard])
    agent.run("go", timeout=10)
    assert runtime.stats().tool_calls["blocked"] == 1
