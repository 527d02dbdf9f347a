"""Spans, metrics and introspection lines of a run, derived from its events (DESIGN.md 10).

Spans, named and attributed as the OpenTelemetry GenAI semantic conventions say
(`agent_runtime._semconv`): `invoke_agent {role}` > `agent.turn` (no convention: ours) >
`chat {model}` (one per model attempt) / `execute_tool {tool}` (one per tool call that
starts). Attributes: `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`
on each; `gen_ai.agent.name` (the role) on the run's; `gen_ai.response.model`,
`gen_ai.usage.input_tokens` / `output_tokens` and `gen_ai.response.finish_reasons` on a
chat's; `gen_ai.tool.name` and `gen_ai.tool.call.id` on a tool's; `error.type` on what
failed. A run
started where a span is current (a delegating tool's: a subagent's run; an application's
request span) is that span's child, in its trace. Metrics: see `_instruments`.

Lemon's introspection events are span events and debug log lines, each off the per-token
path: `agent.loop.started` (run span), `agent.turn.observed` (turn span, as it ends),
`tool.use.observed` (tool span, as it ends) and `agent.loop.ended` (run span). Their
payloads are counts, names, outcomes and seconds: never prompt, answer or tool-argument
text. Provider retries are `agent.provider.retry` / `agent.provider.retry_end` events of the
turn span, and an abort is an `agent.aborted` event of the run span.

Status: ERROR on a failed run (`error.type` is its reason's code), a failed model attempt and
a tool call with an error result. An aborted run, and what the abort cut short, keeps an
unset status: an abort is a caller's decision, not a failure (`agent.outcome` says it).

Timing: a model attempt starts when its request was ready (after the turn's last input was
committed, or the retry backoff ended), as far as the events tell: a slow
`transform_context` counts into the attempt. With no OpenTelemetry SDK installed and debug
logging off, the run skips all of this (`enabled` is False).
"""

from __future__ import annotations

import contextvars
import logging
import re
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanKind, Status, StatusCode

import agent_runtime._semconv as sc
import agent_runtime.loop._instruments as m
from agent_runtime._key import AgentKey
from agent_runtime.events import (
    AgentEnd,
    AgentStart,
    Canceled,
    Error,
    Event,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ProviderRetry,
    ProviderRetryEnd,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)
from agent_runtime.llm.middleware.observable import ObservableModel
from agent_runtime.messages import AssistantMessage
from agent_runtime.telemetry import telemetry_enabled, tracer
from supervisors._log import LibraryLogger, get_logger

log = get_logger(__name__)

_CODE = re.compile(r"\bcode=([\w.-]+)")
_REASON_CODE = re.compile(r"^([\w.-]+)(?::|$)")


def current_links() -> list[Link]:
    """The span current in the caller's context (e.g. a tool delegating), as a link: the run
    the caller starts becomes that span's child (`RunTrace`)."""
    span_context = trace.get_current_span().get_span_context()
    return [Link(span_context)] if span_context.is_valid else []


def debug_logged(logger: LibraryLogger | None = None) -> bool:
    """Whether `logger` (this module's by default) logs debug lines (asked once per run)."""
    return (logger or log).is_enabled_for(logging.DEBUG)


def observes_itself(model: Any) -> bool:
    """Whether `model` is (or wraps) an `ObservableModel`, which records the GenAI metrics of
    each call itself."""
    for _ in range(16):  # middleware chains are short; a cycle must not hang a run
        if model is None:
            return False
        if isinstance(model, ObservableModel):
            return True
        model = getattr(model, "inner", None)
    return False


def _error_type(text: str) -> str:
    """The error code in a failure's text: `code=...` of an LLMError, a `code: ...` prefix, or
    the text itself when it is one word (`empty_assistant_response`); else "error"."""
    found = _CODE.search(text) or _REASON_CODE.match(text)
    return found.group(1) if found else "error"


def _tool_error_type(details: dict[str, Any]) -> str:
    """`error.type` of a failed call: the exception it raised, else what went wrong
    (`timeout`, `invalid_arguments`, `not_found`, ...), else `_OTHER` (the conventions' word)."""
    kind = details.get("exception") or details.get("outcome")
    return kind if isinstance(kind, str) and kind else sc.ERROR_TYPE_OTHER


class RunTrace:
    """Observes one run's events and keeps its spans; not thread-safe (the run's own)."""

    def __init__(
        self,
        agent: AgentKey | None,
        run_id: str,
        model: str,
        provider: str,
        links: Sequence[Any],
        chat_model: Any = None,
    ) -> None:
        # With no OpenTelemetry SDK installed, spans and metrics are no-ops: skip the work.
        self._spans = telemetry_enabled()
        self._log: Any = None
        if debug_logged():
            self._log = log.bind(
                run_id=run_id,
                session=agent.session if agent else None,
                role=agent.role if agent else None,
                index=agent.index if agent else None,
            )
        self.enabled = self._spans or self._log is not None
        if not self.enabled:
            return
        self._tracer = tracer()
        self._base: dict[str, Any] = {"agent.run_id": run_id}
        if agent is not None:
            self._base.update(
                {
                    "agent.session": agent.session,
                    "agent.role": agent.role,
                    "agent.index": agent.index,
                }
            )
        self._role = {"agent.role": agent.role} if agent is not None else {}
        self._agent_name = agent.role if agent is not None else None
        self._model = {
            sc.GEN_AI_OPERATION_NAME: sc.OPERATION_CHAT,
            sc.GEN_AI_PROVIDER_NAME: provider,
            sc.GEN_AI_REQUEST_MODEL: model,
        }
        self._gen_ai_metrics = not observes_itself(chat_model)
        parent = next((link.context for link in links if link.context.is_valid), None)
        self._parent = trace.set_span_in_context(NonRecordingSpan(parent)) if parent else None
        self._wall = time.time_ns() - time.monotonic_ns()  # monotonic to epoch, for spans
        self._run: Span | None = None
        self._turn: Span | None = None
        self._chat: Span | None = None
        self._tools: dict[str, tuple[Span | None, int]] = {}
        self._started = self._turn_started = self._ready = self._chat_started = 0
        self._awaiting = False  # a request is out and no chunk of its answer came yet
        self._turns = self._tool_calls = self._input = self._output = 0
        self._turn_input = self._turn_output = 0

    def _span(
        self, name: str, parent: Span | None, attrs: dict[str, Any], start: int | None = None
    ) -> Span:
        ctx = trace.set_span_in_context(parent) if parent is not None else None
        return self._tracer.start_span(
            name,
            context=ctx,
            kind=SpanKind.INTERNAL,
            attributes={**self._base, **attrs},
            start_time=None if start is None else start + self._wall,
        )

    def _introspect(self, span: Span | None, name: str, **payload: Any) -> None:
        """A Lemon introspection event: a span event and a debug line, the same payload."""
        if span is not None:
            span.add_event(name, payload)
        if self._log is not None:
            self._log.debug(name, **payload)

    def add_event(self, name: str, attrs: dict[str, Any]) -> None:
        """A span event on the open turn span, else the run span (none without an SDK)."""
        if not self.enabled:
            return
        span = self._turn if self._turn is not None else self._run
        if span is not None:
            span.add_event(name, attrs)

    def tool_context(self, call_id: str) -> contextvars.Context:
        """A copy of the current context in which `call_id`'s span is current (work the tool
        starts, e.g. a delegated subagent's run, becomes its child)."""
        ctx = contextvars.copy_context()
        span = self._tools.get(call_id, (None, 0))[0] if self.enabled else None
        if span is not None:
            ctx.run(otel_context.attach, trace.set_span_in_context(span))
        return ctx

    def observe(self, event: Event) -> None:
        """Update spans, metrics and introspection for one event of the run."""
        if isinstance(event, MessageUpdate):
            return  # the per-token event: nothing to record
        now = time.monotonic_ns()
        if isinstance(event, AgentStart):
            self._started = now
            if self._spans:
                attrs = {**self._base, **self._model}
                attrs[sc.GEN_AI_OPERATION_NAME] = sc.OPERATION_INVOKE_AGENT
                if self._agent_name is not None:
                    attrs[sc.GEN_AI_AGENT_NAME] = self._agent_name
                self._run = self._tracer.start_span(
                    sc.span_name(sc.OPERATION_INVOKE_AGENT, self._agent_name),
                    context=self._parent,
                    kind=SpanKind.INTERNAL,
                    attributes=attrs,
                )
            self._introspect(
                self._run,
                "agent.loop.started",
                **{sc.GEN_AI_PROVIDER_NAME: self._model[sc.GEN_AI_PROVIDER_NAME]},
                **{sc.GEN_AI_REQUEST_MODEL: self._model[sc.GEN_AI_REQUEST_MODEL]},
            )
        elif isinstance(event, TurnStart):
            self._end_turn(None, now)
            self._turns += 1
            self._turn_started = self._ready = now
            self._awaiting = True
            self._turn_input = self._turn_output = 0
            if self._spans:
                self._turn = self._span("agent.turn", self._run, {"agent.turn": self._turns})
                m.TURNS.add(1)
        elif isinstance(event, MessageStart):
            if isinstance(event.message, AssistantMessage):
                self._answer_started(now)
        elif isinstance(event, MessageEnd):
            if isinstance(event.message, AssistantMessage):
                self._answer_ended(event.message, now)
            else:  # an input of the next request (prompt, steering, tool result)
                self._ready = now
        elif isinstance(event, ProviderRetry):
            self._retry(event, now)
        elif isinstance(event, ProviderRetryEnd):
            if self._turn is not None:
                attrs = {"attempt": event.attempt, "outcome": event.outcome}
                self._turn.add_event("agent.provider.retry_end", attrs)
        elif isinstance(event, ToolExecutionStart):
            span = None
            if self._spans:
                span = self._span(
                    sc.span_name(sc.OPERATION_EXECUTE_TOOL, event.name),
                    self._turn or self._run,
                    {
                        sc.GEN_AI_OPERATION_NAME: sc.OPERATION_EXECUTE_TOOL,
                        sc.GEN_AI_TOOL_NAME: event.name,
                        sc.GEN_AI_TOOL_CALL_ID: event.tool_call_id,
                    },
                )
            self._tools[event.tool_call_id] = (span, now)
        elif isinstance(event, ToolExecutionEnd):
            self._tool_ended(event, now)
        elif isinstance(event, TurnEnd):
            self._end_turn(event, now)
        elif isinstance(event, AgentEnd | Error | Canceled):
            self.finish(event)

    # -- model attempts ---------------------------------------------------------------------------

    def _chat_name(self) -> str:
        return sc.span_name(sc.OPERATION_CHAT, self._model[sc.GEN_AI_REQUEST_MODEL])

    def _answer_started(self, now: int) -> None:
        """The first chunk of an answer came (or a committed note began: no request then)."""
        self._chat_started = self._ready
        if self._awaiting and self._spans:
            m.TIME_TO_FIRST_TOKEN.record((now - self._ready) / 1e9, self._model)
        self._awaiting = False
        if self._spans:
            self._chat = self._span(
                self._chat_name(), self._turn or self._run, self._model, self._ready
            )

    def _answer_ended(self, message: AssistantMessage, now: int) -> None:
        span, self._chat = self._chat, None
        self._ready = now
        usage = message.usage
        self._turn_input += usage.input_tokens
        self._turn_output += usage.output_tokens
        self._input += usage.input_tokens
        self._output += usage.output_tokens
        if not self._spans:
            return
        m.TOKEN_COUNT.add(usage.input_tokens, {"type": "input"})
        m.TOKEN_COUNT.add(usage.output_tokens, {"type": "output"})
        failed = message.stop_reason == "error"
        attrs = dict(self._model)
        if message.model:
            attrs[sc.GEN_AI_RESPONSE_MODEL] = message.model
        if failed:
            attrs[sc.ERROR_TYPE] = _error_type(message.error_message or "")
        if self._gen_ai_metrics and message.stop_reason != "aborted":
            m.OPERATION_DURATION.record((now - self._chat_started) / 1e9, attrs)
            if not failed:
                m.TOKEN_USAGE.record(
                    usage.input_tokens, {**attrs, sc.GEN_AI_TOKEN_TYPE: sc.TOKEN_TYPE_INPUT}
                )
                m.TOKEN_USAGE.record(
                    usage.output_tokens, {**attrs, sc.GEN_AI_TOKEN_TYPE: sc.TOKEN_TYPE_OUTPUT}
                )
        if span is None:
            return
        if message.model:
            span.set_attribute(sc.GEN_AI_RESPONSE_MODEL, message.model)
        span.set_attribute(sc.GEN_AI_USAGE_INPUT_TOKENS, usage.input_tokens)
        span.set_attribute(sc.GEN_AI_USAGE_OUTPUT_TOKENS, usage.output_tokens)
        span.set_attribute(sc.GEN_AI_RESPONSE_FINISH_REASONS, [message.stop_reason])
        if failed:
            span.set_attribute(sc.ERROR_TYPE, attrs[sc.ERROR_TYPE])
            span.set_status(Status(StatusCode.ERROR, message.error_message or "error"))
        span.end(now + self._wall)

    def _failed_unanswered(self, error: str, now: int) -> None:
        """An attempt failed before any chunk came (e.g. a 429): its span, after the fact."""
        self._awaiting = False
        if not self._spans:
            return
        kind = _error_type(error)
        if self._gen_ai_metrics:
            m.OPERATION_DURATION.record(
                (now - self._ready) / 1e9, {**self._model, sc.ERROR_TYPE: kind}
            )
        span = self._span(self._chat_name(), self._turn or self._run, self._model, self._ready)
        span.set_attribute(sc.ERROR_TYPE, kind)
        span.set_status(Status(StatusCode.ERROR, error))
        span.end(now + self._wall)

    def _retry(self, event: ProviderRetry, now: int) -> None:
        if self._awaiting:
            self._failed_unanswered(event.error, now)
        self._ready = now + int(event.delay * 1e9)  # the next attempt starts after the backoff
        self._awaiting = True
        if not self._spans:
            return
        m.RETRIES.add(1)
        target = self._turn or self._run
        if target is not None:
            attrs: dict[str, Any] = {
                "attempt": event.attempt,
                "delay_s": event.delay,
                sc.ERROR_TYPE: _error_type(event.error),
                "error": event.error,
            }
            target.add_event("agent.provider.retry", attrs)

    # -- tools and turns --------------------------------------------------------------------------

    def _tool_ended(self, event: ToolExecutionEnd, now: int) -> None:
        if event.tool_call_id not in self._tools:
            return  # the end of a call that never started: no span, not a call made
        span, started = self._tools.pop(event.tool_call_id)
        self._tool_calls += 1
        details = event.result.details or {}
        outcome = str(details.get("outcome", "error")) if event.is_error else "ok"
        seconds = (now - started) / 1e9
        name = {sc.GEN_AI_TOOL_NAME: event.name}
        if self._spans:
            m.TOOL_CALLS.add(1, {"outcome": "error" if event.is_error else "ok"})
            m.TOOL_DURATION.record(seconds, {**name, "outcome": outcome})
        self._introspect(
            span,
            "tool.use.observed",
            **name,
            **{sc.GEN_AI_TOOL_CALL_ID: event.tool_call_id},
            outcome=outcome,
            is_error=event.is_error,
            duration_s=seconds,
        )
        if span is None:
            return
        span.set_attribute("tool.outcome", outcome)
        if event.is_error and not details.get("cancelled"):
            span.set_attribute(sc.ERROR_TYPE, _tool_error_type(details))
            span.set_status(Status(StatusCode.ERROR, outcome))
        span.end(now + self._wall)

    def _end_turn(self, event: TurnEnd | None, now: int) -> None:
        span, self._turn = self._turn, None
        if event is None:
            if span is not None:
                span.end(now + self._wall)
            return
        seconds = (now - self._turn_started) / 1e9
        if self._spans:
            m.TURN_DURATION.record(seconds, self._role)
        self._introspect(
            span,
            "agent.turn.observed",
            turn=self._turns,
            stop_reason=event.message.stop_reason,
            tool_calls=len(event.tool_results),
            tool_errors=sum(1 for r in event.tool_results if r.is_error),
            input_tokens=self._turn_input,
            output_tokens=self._turn_output,
            duration_s=seconds,
        )
        if span is not None:
            span.end(now + self._wall)

    def finish(self, terminal: Event | None) -> None:
        """End every open span and record the run's end (idempotent): its span's status and
        `agent.outcome` say how the run ended."""
        if not self.enabled or not self._started:
            return
        now = time.monotonic_ns()
        if isinstance(terminal, Error) and self._awaiting:
            # Neither a transcript refused nor a guardrail's block sent a request.
            sent = not terminal.reason.startswith(("invalid_transcript:", "guardrail:"))
            if sent:  # the request failed before any chunk of its answer came
                self._failed_unanswered(terminal.reason, now)
        for span, _ in self._tools.values():
            if span is not None:
                span.end()
        self._tools.clear()
        if self._chat is not None:
            self._chat.end()
            self._chat = None
        self._end_turn(None, now)
        run, self._run = self._run, None
        self._started, started = 0, self._started
        if isinstance(terminal, AgentEnd):
            outcome = "completed"
        elif isinstance(terminal, Error):
            outcome = "failed"
        elif isinstance(terminal, Canceled):
            outcome = "canceled"
        else:
            outcome = "closed"  # the generator was closed before its end
        seconds = (now - started) / 1e9
        if self._spans:
            m.RUNS.add(1, {"outcome": outcome})
            m.RUN_DURATION.record(seconds, {**self._role, "outcome": outcome})
        ended: dict[str, Any] = {"outcome": outcome}
        if isinstance(terminal, Error | Canceled):
            ended["reason"] = terminal.reason
        if isinstance(terminal, Canceled) and run is not None:
            run.add_event("agent.aborted", {"reason": terminal.reason})
        self._introspect(
            run,
            "agent.loop.ended",
            **ended,
            turns=self._turns,
            tool_calls=self._tool_calls,
            input_tokens=self._input,
            output_tokens=self._output,
            duration_s=seconds,
        )
        if run is None:
            return
        run.set_attribute("agent.outcome", outcome)
        if isinstance(terminal, Error):
            run.set_attribute(sc.ERROR_TYPE, _error_type(terminal.reason))
            run.set_status(Status(StatusCode.ERROR, terminal.reason))
        run.end(now + self._wall)
