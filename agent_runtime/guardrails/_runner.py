"""Running a run's guardrails at one point: verdicts, blocking, and what a failure records."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_runtime._key import AgentKey
from agent_runtime.guardrails._base import (
    POINTS,
    Guardrail,
    GuardrailContext,
    GuardrailPoint,
    GuardrailResult,
)
from agent_runtime.messages import AssistantMessage, Message, TextContent, ToolResult
from agent_runtime.telemetry import log_content, meter
from supervisors._log import get_logger

log = get_logger(__name__)

FAILURES = meter().create_counter(
    "agent.guardrail.failures",
    unit="{check}",
    description="Guardrail checks that failed, by guardrail, point (at) and mode",
)

SpanEvent = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class Trip:
    """A blocking guardrail failed: the run (or the tool call) does not go on."""

    guardrail: str
    at: GuardrailPoint
    explanation: str

    @property
    def reason(self) -> str:
        """The run's `Error` reason: `guardrail: NAME at POINT: EXPLANATION`
        (`agent_runtime._errors.run_failed` reads it back into a GuardrailTripped)."""
        return f"guardrail: {self.guardrail} at {self.at}: {self.explanation}"


def tool_call_text(name: str, arguments: dict[str, Any]) -> str:
    """The text a `tool_call` guardrail checks: `name + " " + json(arguments)`."""
    return name + " " + json.dumps(arguments, ensure_ascii=False)


def content_text(content: str | Sequence[object]) -> str:
    """The text blocks of `content` (or `content` itself, a string), one per line; images,
    thinking and tool calls are not text."""
    if isinstance(content, str):
        return content
    return "\n".join(block.text for block in content if isinstance(block, TextContent))


FINAL_RESULT = "final_result"
"""The tool typed output is answered through (`agent_runtime.loop.OUTPUT_TOOL`; the loop imports
this package, so the name is repeated here, and a test keeps the two equal)."""


def response_text(message: AssistantMessage) -> str:
    """What a `model_response` guardrail checks: the answer's text and, for typed output
    answered through the `final_result` tool, that call's arguments as JSON (the answer itself,
    which no tool batch and so no `tool_call` guardrail sees)."""
    text = content_text(message.content)
    answers = [call for call in message.tool_calls if call.name == FINAL_RESULT]
    if not answers:
        return text
    parts = [text] if text else []
    parts += [json.dumps(call.arguments, ensure_ascii=False, sort_keys=True) for call in answers]
    return "\n".join(parts)


def request_text(messages: Sequence[Message]) -> str:
    """What a `model_request` guardrail checks: the text of the messages after the model's
    last answer (the prompt, steering, follow-ups, tool results), one per line. It walks back
    only over those, so its cost does not grow with the history."""
    start = len(messages)
    while start and not isinstance(messages[start - 1], AssistantMessage):
        start -= 1
    return "\n".join(content_text(m.content) for m in messages[start:] if m.content)


def result_text(result: ToolResult) -> str:
    """What a `tool_result` guardrail checks: the result's text."""
    return content_text(result.content)


class GuardrailRunner:
    """The guardrails of one run, by point; built once per run, used on its event loop.

    `check` asks each guardrail at the point in the order given, and stops at the first
    blocking one that fails. Every failure is logged (`guardrail.failed`, warning; the checked
    text only when `telemetry.log_content` is on), counted in `agent.guardrail.failures` and
    recorded as an `agent.guardrail` span event of the run; a report-only one lets the run go
    on.
    """

    def __init__(
        self,
        guardrails: Sequence[Guardrail],
        agent: AgentKey | None,
        run_id: str,
        span_event: SpanEvent | None = None,
    ) -> None:
        self._at: dict[str, list[Guardrail]] = {p: [] for p in POINTS}
        for guardrail in guardrails:
            self._at[guardrail.at].append(guardrail)
        self._agent, self._run_id = agent, run_id
        self._span_event = span_event
        self._log = log.bind(
            run_id=run_id,
            session=agent.session if agent else None,
            role=agent.role if agent else None,
            index=agent.index if agent else None,
        )

    def watches(self, at: GuardrailPoint) -> bool:
        """Whether any guardrail checks at `at` (else the point costs nothing)."""
        return bool(self._at[at])

    async def check(
        self,
        at: GuardrailPoint,
        text: str,
        *,
        tool_name: str | None = None,
        arguments: dict[str, Any] | None = None,
    ) -> Trip | None:
        """The Trip of the first blocking guardrail at `at` that fails `text`, or None."""
        guardrails = self._at[at]
        if not guardrails:
            return None
        context = GuardrailContext(
            agent=self._agent,
            run_id=self._run_id,
            at=at,
            tool_name=tool_name,
            arguments=arguments,
        )
        for guardrail in guardrails:
            result = await _verdict(guardrail, text, context)
            if result.passed:
                continue
            explanation = result.explanation or "no explanation given"
            self._record(guardrail, at, explanation, text)
            if guardrail.mode == "block":
                return Trip("".join(guardrail.name.split()), at, explanation)
        return None

    def _record(self, guardrail: Guardrail, at: str, explanation: str, text: str) -> None:
        facts: dict[str, Any] = {
            "guardrail": guardrail.name,
            "at": at,
            "mode": guardrail.mode,
            "explanation": explanation,
        }
        if log_content():
            self._log.warning("guardrail.failed", **facts, text=text)
        else:
            self._log.warning("guardrail.failed", **facts)
        FAILURES.add(1, {"guardrail": guardrail.name, "at": at, "mode": guardrail.mode})
        if self._span_event is not None:
            self._span_event("agent.guardrail", facts)


async def _verdict(guardrail: Guardrail, text: str, context: GuardrailContext) -> GuardrailResult:
    try:
        result: Any = guardrail.check(text, context=context)
        if inspect.isawaitable(result):
            result = await result
    except Exception as exc:  # a guardrail that cannot decide does not let the text through
        return GuardrailResult(False, f"the check raised {type(exc).__name__}: {exc}")
    if not isinstance(result, GuardrailResult):
        return GuardrailResult(
            False, f"the check returned {type(result).__name__}, not a GuardrailResult"
        )
    return result
