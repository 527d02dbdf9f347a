"""Spans and metrics of a run, derived from its events (DESIGN.md 10).

Spans: `agent.run` > `agent.turn` > `gen_ai.chat` (one per model attempt) / `tool.execute`
(one per tool call that starts), with GenAI semantic-convention attributes: a tool span has
`gen_ai.operation.name = "execute_tool"`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, and
`error.type` when the call fails. A run started from inside a tool of another run (a
delegated subagent) links to that tool's span. Metrics: runs, turns, tool calls (those that
started), tokens and provider retries. Everything is a no-op until the application installs
an OpenTelemetry SDK.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

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
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)
from agent_runtime.messages import AssistantMessage
from agent_runtime.telemetry import meter, telemetry_enabled, tracer

_meter = meter()
RUNS = _meter.create_counter("agent.runs", unit="{run}", description="Runs ended, by outcome")
TURNS = _meter.create_counter("agent.turns", unit="{turn}", description="Turns started")
TOOL_CALLS = _meter.create_counter(
    "agent.tool_calls", unit="{call}", description="Tool calls ended, by outcome"
)
TOKENS = _meter.create_counter("agent.tokens", unit="{token}", description="Tokens, by type")
RETRIES = _meter.create_counter(
    "agent.provider_retries", unit="{retry}", description="Provider retries scheduled"
)


def current_links() -> list[Link]:
    """A link to the span current in the caller's context (e.g. a tool delegating), if any."""
    span_context = trace.get_current_span().get_span_context()
    return [Link(span_context)] if span_context.is_valid else []


class RunTrace:
    """Observes one run's events and keeps its spans; not thread-safe (the run's own)."""

    def __init__(
        self, agent: AgentKey | None, run_id: str, model: str, provider: str, links: Sequence[Any]
    ) -> None:
        self._tracer = tracer()
        # With no OpenTelemetry SDK installed, spans and metrics are no-ops: skip the work.
        self.enabled = telemetry_enabled()
        self._base: dict[str, Any] = {"agent.run_id": run_id}
        if agent is not None:
            self._base.update(
                {
                    "agent.session": agent.session,
                    "agent.role": agent.role,
                    "agent.index": agent.index,
                }
            )
        self._model, self._provider = model, provider
        self._links = list(links)
        self._run: Span | None = None
        self._turn: Span | None = None
        self._chat: Span | None = None
        self._tools: dict[str, Span] = {}

    def _child(self, name: str, parent: Span | None, **attrs: Any) -> Span:
        ctx = trace.set_span_in_context(parent) if parent is not None else None
        return self._tracer.start_span(
            name, context=ctx, kind=SpanKind.INTERNAL, attributes={**self._base, **attrs}
        )

    def tool_context(self, call_id: str) -> contextvars.Context:
        """A copy of the current context in which `call_id`'s span is current (tools started
        in it — e.g. a delegated subagent's run — link back to it)."""
        ctx = contextvars.copy_context()
        span = self._tools.get(call_id)
        if span is not None:
            ctx.run(otel_context.attach, trace.set_span_in_context(span))
        return ctx

    def observe(self, event: Event) -> None:
        """Update spans and metrics for one event of the run."""
        if isinstance(event, MessageUpdate):
            return  # the per-token event: nothing to record
        if isinstance(event, AgentStart):
            self._run = self._tracer.start_span(
                "agent.run", kind=SpanKind.INTERNAL, attributes=self._base, links=self._links
            )
        elif isinstance(event, TurnStart):
            self._end_turn()
            self._turn = self._child("agent.turn", self._run)
            TURNS.add(1)
        elif isinstance(event, MessageStart) and isinstance(event.message, AssistantMessage):
            self._chat = self._child(
                "gen_ai.chat",
                self._turn or self._run,
                **{
                    "gen_ai.operation.name": "chat",
                    "gen_ai.system": self._provider,
                    "gen_ai.request.model": self._model,
                },
            )
        elif isinstance(event, MessageEnd) and isinstance(event.message, AssistantMessage):
            self._end_chat(event.message)
        elif isinstance(event, ProviderRetry):
            RETRIES.add(1)
        elif isinstance(event, ToolExecutionStart):
            self._tools[event.tool_call_id] = self._child(
                "tool.execute",
                self._turn or self._run,
                **{
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": event.name,
                    "gen_ai.tool.call.id": event.tool_call_id,
                },
            )
        elif isinstance(event, ToolExecutionEnd):
            span = self._tools.pop(event.tool_call_id, None)
            if span is None:
                return  # the end of a call that never started: no span, not a call made
            outcome = "error" if event.is_error else "ok"
            TOOL_CALLS.add(1, {"outcome": outcome})
            if event.is_error:
                span.set_attribute("error.type", _error_type(event))
                span.set_status(Status(StatusCode.ERROR, outcome))
            span.end()
        elif isinstance(event, TurnEnd):
            self._end_turn()
        elif isinstance(event, AgentEnd | Error | Canceled):
            self.finish(event)

    def _end_chat(self, message: AssistantMessage) -> None:
        span, self._chat = self._chat, None
        usage = message.usage
        TOKENS.add(usage.input_tokens, {"type": "input"})
        TOKENS.add(usage.output_tokens, {"type": "output"})
        if span is None:
            return
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        span.set_attribute("gen_ai.response.finish_reasons", [message.stop_reason])
        if message.stop_reason in ("error", "aborted"):
            span.set_status(Status(StatusCode.ERROR, message.error_message or message.stop_reason))
        span.end()

    def _end_turn(self) -> None:
        span, self._turn = self._turn, None
        if span is not None:
            span.end()

    def finish(self, terminal: Event | None) -> None:
        """End every open span; the run span's status says how the run ended (idempotent)."""
        for span in list(self._tools.values()):
            span.end()
        self._tools.clear()
        if self._chat is not None:
            self._chat.end()
            self._chat = None
        self._end_turn()
        run, self._run = self._run, None
        if run is None:
            return
        if isinstance(terminal, AgentEnd):
            outcome = "completed"
        elif isinstance(terminal, Error):
            outcome = "failed"
        elif isinstance(terminal, Canceled):
            outcome = "canceled"
        else:
            outcome = "closed"  # the generator was closed before its end
        RUNS.add(1, {"outcome": outcome})
        run.set_attribute("agent.outcome", outcome)
        if isinstance(terminal, Error | Canceled):
            run.set_status(Status(StatusCode.ERROR, terminal.reason))
        run.end()


def _error_type(end: ToolExecutionEnd) -> str:
    """`error.type` of a failed call: the exception it raised, else what went wrong
    (`timeout`, `invalid_arguments`, `not_found`, ...), else `_OTHER` (the conventions' word)."""
    details = end.result.details or {}
    kind = details.get("exception") or details.get("outcome")
    return kind if isinstance(kind, str) and kind else "_OTHER"
