"""Event models: what a run reports, in order, to its stream and subscribers.

Every event is a frozen pydantic model discriminated by its `type` literal and carries the run's
identity: `agent` (an `AgentKey`, or None outside an agent), `run_id`, `seq` (per run, gap-free
unless events were dropped, which an `EventsDropped` marker then reports) and `ts` (wall-clock
seconds). Every event round-trips through JSON, `agent` coming back as an `AgentKey`. A run ends
with exactly one terminal event: `AgentEnd`, `Error` or `Canceled`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeGuard, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    WrapValidator,
    model_serializer,
)

from agent_runtime._key import AgentKey, validated_key
from agent_runtime._trusted import filled
from agent_runtime.messages import AssistantMessage, Message, ToolResult, ToolResultMessage

__all__ = [
    "EVENT_TYPES",
    "TERMINAL_TYPES",
    "AgentEnd",
    "AgentStart",
    "Canceled",
    "CustomEvent",
    "Error",
    "Event",
    "EventAdapter",
    "EventsDropped",
    "MessageDelta",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "ProviderRetry",
    "ProviderRetryEnd",
    "Terminal",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "TurnEnd",
    "TurnStart",
    "is_terminal",
]

_Key = Annotated[AgentKey, WrapValidator(validated_key)]


# The `__pydantic_fields_set__` of every deferred update, shared: a set is an object the
# garbage collector tracks, and a token's events wait in a subscription until read. Safe to
# share because these models are frozen (pydantic changes the set only on assignment, and
# `model_copy` copies it first). `message` counts as set: it is, once read.
_DELTA_FIELDS = {"kind", "content_index", "delta"}
_DEFERRED_UPDATE_FIELDS = {"agent", "run_id", "seq", "ts", "delta", "message"}


class _EventBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    agent: _Key | None = None
    run_id: str = ""
    seq: int = 0
    ts: float = Field(default_factory=time.time)


class AgentStart(_EventBase):
    """A run started."""

    type: Literal["agent_start"] = "agent_start"


class TurnStart(_EventBase):
    """A turn (one model call and the tool calls it asks for) started."""

    type: Literal["turn_start"] = "turn_start"


class MessageStart(_EventBase):
    """A message entered the transcript (user, tool result) or began streaming (assistant)."""

    type: Literal["message_start"] = "message_start"
    message: Message


class MessageDelta(BaseModel):
    """One streamed fragment of the assistant message: `delta` appended to block `content_index`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["text", "thinking", "tool_call"]
    content_index: int
    delta: str

    @classmethod
    def of(
        cls, kind: Literal["text", "thinking", "tool_call"], content_index: int, delta: str
    ) -> MessageDelta:
        """`MessageDelta(kind=..., content_index=..., delta=...)` from values the caller
        guarantees (a run's own builder): not validated again, once per streamed token."""
        return delta_of(kind, content_index, delta)


class MessageUpdate(_EventBase):
    """The streaming assistant message grew by `delta`; `message` is its state after the delta.

    Built by a run with `MessageUpdate.deferred(...)`, `message` is made on first access (or
    when the event is serialised, compared, copied or pickled) from a snapshot function the
    run hands over, and kept, as `functools.cached_property` keeps its value: streaming costs
    no message per delta, and a reader that buffers every update of an answer holds memory
    linear in its length. To every reader it is an ordinary field; readers on several
    threads all get the one message the first of them made.
    """

    type: Literal["message_update"] = "message_update"
    delta: MessageDelta
    message: AssistantMessage  # last: a deferred one enters the instance's dict last
    _snapshot: Callable[[], AssistantMessage] | None = PrivateAttr(default=None)

    @classmethod
    def deferred(
        cls,
        snapshot: Callable[[], AssistantMessage],
        delta: MessageDelta,
        *,
        agent: AgentKey | None = None,
        run_id: str = "",
        seq: int = 0,
    ) -> MessageUpdate:
        """An update whose `message` is `snapshot()`, called once, when first needed."""
        return deferred_update(snapshot, delta, agent, run_id, seq)

    def __getattr__(self, name: str) -> Any:
        # Only reached when `name` is not in the instance's dict: a deferred `message`.
        if name == "message":
            return self._materialized()
        return super().__getattr__(name)  # type: ignore[misc]

    def _materialized(self) -> AssistantMessage:
        values = self.__dict__
        message = values.get("message")
        if message is None:
            snapshot = self._snapshot
            if snapshot is None:  # another reader made it just now
                return values["message"]  # type: ignore[no-any-return]
            # As `functools.cached_property` stores its value: in the instance's dict, the
            # first reader's (`setdefault` is atomic), so every reader gets the same message.
            values.setdefault("message", snapshot())
            self._snapshot = None  # made: the event no longer holds the answer's builder
            message = values["message"]
        return message  # type: ignore[no-any-return]

    def __copy__(self) -> MessageUpdate:
        self._materialized()
        return super().__copy__()

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> MessageUpdate:
        self._materialized()
        return super().__deepcopy__(memo)

    def __getstate__(self) -> dict[Any, Any]:
        self._materialized()
        return super().__getstate__()

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> Any:
        self._materialized()
        return handler(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageUpdate):
            return NotImplemented
        self._materialized()
        other._materialized()
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]

    def __repr_args__(self) -> Any:
        self._materialized()
        return super().__repr_args__()


def delta_of(
    kind: Literal["text", "thinking", "tool_call"], content_index: int, delta: str
) -> MessageDelta:
    """`MessageDelta.of`, called directly (no class attribute lookup): once per streamed token.

    Built with `filled` (see agent_runtime/_trusted.py), as `deferred_update` is: the pair buys
    "1000 streamed deltas to one subscriber" 104k/s against 70k/s validated and made with
    `model_construct`, and "CPU per streamed delta" 9.2 us against 13.3 us (2026-12-06, both
    in one session)."""
    values = {"kind": kind, "content_index": content_index, "delta": delta}
    return filled(MessageDelta, values, _DELTA_FIELDS, None)


def deferred_update(
    snapshot: Callable[[], AssistantMessage],
    delta: MessageDelta,
    agent: AgentKey | None,
    run_id: str,
    seq: int,
) -> MessageUpdate:
    """`MessageUpdate.deferred`, called directly: once per streamed token. What
    `model_construct` leaves, without its generic work (see `delta_of` for the figure it
    buys): `message` left out until first read, the snapshot function its private attribute."""
    values = {
        "agent": agent,
        "run_id": run_id,
        "seq": seq,
        "ts": time.time(),
        "type": "message_update",
        "delta": delta,
    }
    return filled(MessageUpdate, values, _DEFERRED_UPDATE_FIELDS, {"_snapshot": snapshot})


class MessageEnd(_EventBase):
    """A message is complete (for the assistant: the final, committed message)."""

    type: Literal["message_end"] = "message_end"
    message: Message


class ToolExecutionStart(_EventBase):
    """A tool call started executing with validated `args`."""

    type: Literal["tool_execution_start"] = "tool_execution_start"
    tool_call_id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class ToolExecutionUpdate(_EventBase):
    """A running tool reported progress (`partial`, from `ToolContext.update`)."""

    type: Literal["tool_execution_update"] = "tool_execution_update"
    tool_call_id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    partial: ToolResult


class ToolExecutionEnd(_EventBase):
    """A tool call's result: exactly one per call, also when it failed or was aborted, and
    for a call that never started (skipped by steering, or not started before an abort; no
    `ToolExecutionStart` precedes it), always before the next turn or the run's terminal."""

    type: Literal["tool_execution_end"] = "tool_execution_end"
    tool_call_id: str
    name: str
    result: ToolResult
    is_error: bool = False


class ToolApprovalRequested(_EventBase):
    """A tool call waits for a human's decision (`Agent.approve` / `Agent.deny`) before it
    runs; the run is in progress meanwhile (`AgentState.pending_approvals` lists the call)."""

    type: Literal["tool_approval_requested"] = "tool_approval_requested"
    tool_call_id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class ToolApprovalDecided(_EventBase):
    """A waiting tool call was decided: approved (it runs, with `args` when they were
    edited) or denied with `reason` (`"approval_timeout"` when nobody decided in time);
    `by` says who decided (None when not told, or for a timeout)."""

    type: Literal["tool_approval_decided"] = "tool_approval_decided"
    tool_call_id: str
    name: str
    approved: bool
    reason: str | None = None
    by: str | None = None
    args: dict[str, Any] | None = None


class TurnEnd(_EventBase):
    """A turn ended: its assistant message as kept (with the arguments a human edited when
    approving a call) and the results of its tool calls, in call order."""

    type: Literal["turn_end"] = "turn_end"
    message: AssistantMessage
    tool_results: list[ToolResultMessage] = Field(default_factory=list)


def _finite_json(value: JsonValue) -> JsonValue:
    """Reject NaN and infinities, which JSON cannot carry (they would come back as null)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"data holds {item!r}, which JSON cannot represent")
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return value


class CustomEvent(_EventBase):
    """An application's own event, carried by the same streams as the run's events.

    `name` says what happened (non-empty); `data` is any JSON value (objects, arrays,
    strings, finite numbers, booleans, null), so the event round-trips through JSON like
    every other. Tools emit one with `ToolContext.emit(name, data)`: it reaches the agent's
    subscribers in order with the run's other events. Applications may also push one into an
    `EventStream` directly.

    Raises:
        pydantic.ValidationError: `name` is not a non-empty str, or `data` is not a JSON value.
    """

    type: Literal["custom"] = "custom"
    name: str = Field(min_length=1)
    data: Annotated[JsonValue, AfterValidator(_finite_json)] = None


class ProviderRetry(_EventBase):
    """A retryable provider failure: attempt `attempt` will be retried after `delay` seconds."""

    type: Literal["provider_retry"] = "provider_retry"
    attempt: int
    delay: float
    error: str


class ProviderRetryEnd(_EventBase):
    """A sequence of provider retries ended with `outcome`."""

    type: Literal["provider_retry_end"] = "provider_retry_end"
    attempt: int
    outcome: Literal["succeeded", "failed", "aborted"]


class EventsDropped(_EventBase):
    """`count` events were dropped by overflow right before the event that follows this marker."""

    type: Literal["events_dropped"] = "events_dropped"
    count: int


class AgentEnd(_EventBase):
    """Terminal: the run completed; `new_messages` holds only the messages this run created.

    `memory_error` is None once every turn of the run was committed to session memory, else
    why one was not (the run's result stands: the agent's own history has the messages).
    """

    type: Literal["agent_end"] = "agent_end"
    new_messages: list[Message] = Field(default_factory=list)
    memory_error: str | None = None


class Error(_EventBase):
    """Terminal: the run failed with `reason`; `partial` is the unfinished assistant message."""

    type: Literal["error"] = "error"
    reason: str
    partial: AssistantMessage | None = None


class Canceled(_EventBase):
    """Terminal: the run was canceled (`"user_abort"`, `"timeout"`, `"owner_down"`, ...)."""

    type: Literal["canceled"] = "canceled"
    reason: str


Event = Annotated[
    AgentStart
    | TurnStart
    | MessageStart
    | MessageUpdate
    | MessageEnd
    | ToolExecutionStart
    | ToolExecutionUpdate
    | ToolExecutionEnd
    | ToolApprovalRequested
    | ToolApprovalDecided
    | TurnEnd
    | ProviderRetry
    | ProviderRetryEnd
    | CustomEvent
    | EventsDropped
    | AgentEnd
    | Error
    | Canceled,
    Field(discriminator="type"),
]
"""Any event, discriminated by `type`."""

Terminal = AgentEnd | Error | Canceled
"""The events that end a run."""

TERMINAL_TYPES: tuple[type[AgentEnd], type[Error], type[Canceled]] = (AgentEnd, Error, Canceled)
"""The terminal event classes, for `isinstance(event, TERMINAL_TYPES)`."""

EventAdapter: TypeAdapter[Event] = TypeAdapter(Event)
"""Validates / parses one `Event` from Python data or JSON (`validate_json`)."""


EVENT_TYPES: tuple[type, ...] = get_args(get_args(Event)[0])
"""The classes of the `Event` union, for `isinstance(value, EVENT_TYPES)`."""

_TERMINAL_CLASSES = frozenset(TERMINAL_TYPES)
_OTHER_EVENT_CLASSES = frozenset(EVENT_TYPES) - _TERMINAL_CLASSES


def is_terminal(event: object) -> TypeGuard[AgentEnd | Error | Canceled]:
    """True if `event` ends a run (`AgentEnd`, `Error` or `Canceled`, or a subclass).

    Asked several times per streamed token: an event of one of the classes themselves is
    told by a set lookup, where `isinstance` on pydantic classes costs ~80 ns a class."""
    kind = type(event)
    if kind in _TERMINAL_CLASSES:
        return True
    if kind in _OTHER_EVENT_CLASSES:
        return False
    return isinstance(event, TERMINAL_TYPES)
