"""Our run events as AG-UI events: a pure, per-run translator (no I/O, no threads).

The mapping (ag-ui-protocol 1.0 types), ours -> AG-UI:

- the run began -> RUN_STARTED, then STATE_SNAPSHOT of the session's state;
- TurnStart / TurnEnd -> STEP_STARTED / STEP_FINISHED named `turn <n>`;
- the first text delta of an assistant message -> TEXT_MESSAGE_START (role assistant);
- each text delta -> TEXT_MESSAGE_CONTENT (the delta only, never the message so far);
- MessageEnd of that assistant message -> TEXT_MESSAGE_END, then for each of the answer's
  tool calls TOOL_CALL_START, TOOL_CALL_ARGS (its arguments' JSON), TOOL_CALL_END;
- ToolExecutionEnd -> TOOL_CALL_RESULT (the result's text);
- CustomEvent -> CUSTOM (its name and data); ProviderRetry and EventsDropped -> CUSTOM named
  `agent_runtime.provider_retry` / `agent_runtime.events_dropped`; ToolApprovalRequested and
  ToolApprovalDecided -> CUSTOM named `agent_runtime.tool_approval_requested` /
  `agent_runtime.tool_approval_decided` (their fields as the value: a client shows an
  approve / deny control and answers at `POST .../approvals/{tool_call_id}`);
- AgentEnd -> RUN_FINISHED (result: the final text);
- Canceled by the user or the client (`CANCELLED_BY_CLIENT`) -> RUN_FINISHED with outcome
  `cancelled`; any other Canceled -> RUN_ERROR code `canceled`; Error -> RUN_ERROR code
  `run_failed` (its reason without credentials or URLs).

Tool calls are announced when the model's answer is complete, not while its arguments
stream: only then are their ids final (the loop replaces missing or reused ids), and the
TOOL_CALL_RESULT that follows must name the same id. Tool calls of an attempt that failed or
was aborted never ran and are not announced. Thinking is not forwarded. Events of delegated
subagents (another `agent` key) are skipped: the run is the addressed agent's.
"""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunStartedEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from agent_runtime._key import AgentKey
from agent_runtime.events import (
    AgentEnd,
    Canceled,
    Error,
    Event,
    EventsDropped,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ProviderRetry,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolExecutionEnd,
    TurnEnd,
    TurnStart,
)
from agent_runtime.events import CustomEvent as OurCustomEvent
from agent_runtime.messages import AssistantMessage, TextContent
from agent_runtime.server._proxy_answer import final_text
from agent_runtime.server._proxy_redact import public_text

__all__ = ["CANCELLED_BY_CLIENT", "AguiRun"]

CANCELLED_BY_CLIENT = frozenset({"user_abort", "stream_closed"})
"""Cancel reasons that end an AG-UI run as `cancelled` rather than as an error."""


class AguiRun:
    """Translates the events of one run of agent `key` into AG-UI events.

    `thread_id` and `run_id` are the client's (from its `RunAgentInput`) and are what every
    run-scoped event carries. `feed` returns the AG-UI events of one of our events, in order;
    `started(state)` opens the run. Per streamed text delta it makes one event and reads no
    message snapshot.
    """

    def __init__(self, key: AgentKey, thread_id: str, run_id: str) -> None:
        self.key = key
        self._thread_id = thread_id
        self._run_id = run_id
        self._messages = 0  # assistant messages begun so far
        self._turns = 0
        self._message_id: str | None = None  # of the assistant message streaming now
        self._text_open = False
        self._last_state: dict[str, Any] | None = None

    def started(self, state: dict[str, Any]) -> list[BaseEvent]:
        """RUN_STARTED and the session state's first snapshot."""
        begun = RunStartedEvent(thread_id=self._thread_id, run_id=self._run_id)
        return [begun, *self.state(state)]

    def state(self, state: dict[str, Any]) -> list[BaseEvent]:
        """A STATE_SNAPSHOT of `state` when it differs from the last one sent."""
        if state == self._last_state:
            return []
        self._last_state = state
        return [StateSnapshotEvent(snapshot=state)]

    def feed(self, event: Event) -> list[BaseEvent]:
        """The AG-UI events that say what `event` says (none for what AG-UI has no word for)."""
        if event.agent is not None and event.agent != self.key:
            return []  # a delegate's event
        if isinstance(event, MessageUpdate):
            return self._delta(event)
        if isinstance(event, MessageStart):
            if event.message.role == "assistant":
                self._messages += 1
                self._message_id = f"{self._run_id}-m{self._messages}"
                self._text_open = False
            return []
        if isinstance(event, MessageEnd):
            if isinstance(event.message, AssistantMessage):
                return self._assistant_end(event.message)
            return []
        if isinstance(event, ToolExecutionEnd):
            text = "".join(b.text for b in event.result.content if isinstance(b, TextContent))
            return [
                ToolCallResultEvent(
                    message_id=f"{self._run_id}-{event.tool_call_id}-result",
                    tool_call_id=event.tool_call_id,
                    content=text,
                    role="tool",
                )
            ]
        if isinstance(event, TurnStart):
            self._turns += 1
            return [StepStartedEvent(step_name=f"turn {self._turns}")]
        if isinstance(event, TurnEnd):
            return [StepFinishedEvent(step_name=f"turn {self._turns}")]
        return self._other(event)

    def _delta(self, event: MessageUpdate) -> list[BaseEvent]:
        delta = event.delta
        if delta.kind != "text" or not delta.delta or self._message_id is None:
            return []
        content = TextMessageContentEvent(message_id=self._message_id, delta=delta.delta)
        if self._text_open:
            return [content]
        self._text_open = True
        return [TextMessageStartEvent(message_id=self._message_id, role="assistant"), content]

    def _assistant_end(self, message: AssistantMessage) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        message_id = self._message_id or f"{self._run_id}-m{self._messages}"
        if self._text_open:
            out.append(TextMessageEndEvent(message_id=message_id))
        self._text_open = False
        self._message_id = None
        if message.stop_reason in ("error", "aborted"):
            return out  # its tool calls never run
        for call in message.tool_calls:
            out.append(
                ToolCallStartEvent(
                    tool_call_id=call.id, tool_call_name=call.name, parent_message_id=message_id
                )
            )
            out.append(ToolCallArgsEvent(tool_call_id=call.id, delta=json.dumps(call.arguments)))
            out.append(ToolCallEndEvent(tool_call_id=call.id))
        return out

    def _other(self, event: Event) -> list[BaseEvent]:
        if isinstance(event, OurCustomEvent):
            return [CustomEvent(name=event.name, value=event.data)]
        if isinstance(event, ProviderRetry):
            value = {"attempt": event.attempt, "delay": event.delay, "error": event.error}
            return [CustomEvent(name="agent_runtime.provider_retry", value=value)]
        if isinstance(event, EventsDropped):
            return [CustomEvent(name="agent_runtime.events_dropped", value=event.count)]
        if isinstance(event, ToolApprovalRequested | ToolApprovalDecided):
            value = event.model_dump(mode="json", exclude={"agent", "run_id", "seq", "ts"})
            return [CustomEvent(name=f"agent_runtime.{event.type}", value=value)]
        if isinstance(event, AgentEnd):
            return [self._finished(result=final_text(event))]
        if isinstance(event, Canceled):
            if event.reason in CANCELLED_BY_CLIENT:
                return [self._finished(outcome=RunFinishedCancelledOutcome())]
            return [RunErrorEvent(message=f"the run was canceled: {event.reason}", code="canceled")]
        if isinstance(event, Error):
            return [RunErrorEvent(message=public_text(event.reason), code="run_failed")]
        return []

    def _finished(self, **fields: Any) -> RunFinishedEvent:
        return RunFinishedEvent(thread_id=self._thread_id, run_id=self._run_id, **fields)
