"""The messages an agent's actor handles: one frozen dataclass per operation.

Calls come from the `Agent` handle (answered through the mailbox's reply, or at once on
the loop with `AsyncioActor.handle_now`); the rest from the agent's run, which lives on the
same event loop as the actor: questions it needs answered now (`TakeSteering`,
`TakeFollowUps`, `MergeSession`) and facts it reports (`Committed`, `Amended`, `ToolStarted`,
`ToolEnded`, `Requeue`, `RunEnded`). No message carries a mutable container that another
owner keeps: messages hold tuples, and what a reply hands over changes hands with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent_runtime.config import QueueMode
from agent_runtime.event_stream import Subscription
from agent_runtime.events import Event
from agent_runtime.llm.base import ChatModel
from agent_runtime.loop._output import OutputSpec
from agent_runtime.messages import Message
from agent_runtime.templates import Template
from agent_runtime.tools import Tool
from supervisors import LoopFuture

QueueKind = Literal["steering", "follow_up"]


@dataclass(frozen=True, slots=True)
class Queued:
    """A steering or follow-up message, with the system prompt that travels with it."""

    message: Message
    system_prompt: str | None = None


# -- calls from the handle ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StartRun:
    """Start a run (`prompt`, `continue_run` when `prompts` is None). Answered with the run
    id; `outcome` gets the run's terminal event once its end was delivered (or the start's
    error, so a caller that waits only on it still hears why). `subscription`, when given,
    is subscribed with the start and only if the start is taken: it hears the run from its
    first event and nothing of a run before it (`stream`, `astream`)."""

    run_id: str
    prompts: tuple[Message, ...] | None
    trace_links: tuple[Any, ...]
    output: OutputSpec | None
    outcome: LoopFuture[Event]
    subscription: Subscription | None = None


@dataclass(frozen=True, slots=True)
class Steer:
    queued: Queued


@dataclass(frozen=True, slots=True)
class FollowUp:
    queued: Queued


@dataclass(frozen=True, slots=True)
class Abort:
    """Abort the running run (only if it is `run_id`, when given). Answered: was one aborted."""

    reason: str
    run_id: str | None = None


@dataclass(frozen=True, slots=True)
class GetState:
    """Answered with the fields of an `AgentState`."""


@dataclass(frozen=True, slots=True)
class Reset:
    """Clear history, queues and error; answered False while a run is in progress."""


@dataclass(frozen=True, slots=True)
class IdleWait:
    """Answered with `(outcome,)` of the run whose end is not delivered yet, or `()`."""


@dataclass(frozen=True, slots=True)
class SetSystemPrompt:
    """`rendered`: the prompt's text (a Template rendered by the caller, off the loop), for
    the run in progress; None when it could not be rendered there (it applies from the
    next run)."""

    prompt: str | Template
    rendered: str | None


@dataclass(frozen=True, slots=True)
class SetModel:
    model: ChatModel


@dataclass(frozen=True, slots=True)
class SetTools:
    tools: tuple[Tool, ...]


@dataclass(frozen=True, slots=True)
class SetMode:
    kind: QueueKind
    mode: QueueMode


@dataclass(frozen=True, slots=True)
class Decide:
    """Approve (`approved`, with `args` in place of the model's when given) or deny (with
    `reason`) a tool call waiting for approval; `by` names who decided. Answered None, or
    raises `ApprovalError`."""

    tool_call_id: str
    approved: bool
    args: dict[str, Any] | None = None
    reason: str | None = None
    by: str | None = None


@dataclass(frozen=True, slots=True)
class Subscribe:
    subscription: Subscription


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    subscription: Subscription


@dataclass(frozen=True, slots=True)
class PruneSubscriptions:
    """A subscription was collected: drop the dead references."""


# -- from the actor to its run ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pushed:
    """A steering message or follow-up the actor took while the run is on: the run's now."""

    kind: QueueKind
    queued: Queued


@dataclass(frozen=True, slots=True)
class ModeChanged:
    """`set_steering_mode` / `set_follow_up_mode` while the run is on."""

    kind: QueueKind
    mode: QueueMode


# -- from the agent's run ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WouldEnd:
    """The run has no follow-up and would end: handled at once, after what the actor's
    mailbox held (a follow-up in it is pushed to the run first). If the run still has none
    then, it ends: a follow-up the actor takes from then on waits for the next prompt."""

    run_id: str


@dataclass(frozen=True, slots=True)
class QueuesChanged:
    """The run took queued messages to deliver, or put some back: the actor republishes its
    queue counts."""

    run_id: str


@dataclass(frozen=True, slots=True)
class MergeSession:
    """What the session's other agents committed since the actor's history last looked
    (read by the run off the loop); answered with the history the run starts from."""

    run_id: str
    changes: Any  # SessionChanges
    reset_point: int | None = None  # after a reset: the sequence the changes are read from


@dataclass(frozen=True, slots=True)
class Committed:
    """Messages of the run that entered the transcript, in order."""

    run_id: str
    messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class Amended:
    """A committed answer of the run was amended (`old` is now `new`): a human approved one
    of its calls with other arguments."""

    run_id: str
    old: Message
    new: Message


@dataclass(frozen=True, slots=True)
class ToolStarted:
    run_id: str
    call_id: str


@dataclass(frozen=True, slots=True)
class ToolEnded:
    run_id: str
    call_id: str


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    """A call of the run waits for approval (`pending`: a `PendingApproval`)."""

    run_id: str
    pending: Any


@dataclass(frozen=True, slots=True)
class ApprovalWithdrawn:
    """A call stopped waiting without a human: timed out (`decision`, a loop `Decision`) or
    aborted (None)."""

    run_id: str
    tool_call_id: str
    decision: Any


@dataclass(frozen=True, slots=True)
class Requeue:
    """Messages the run took and could not deliver, handed back after its queues closed
    (the loop's clean-up after the end): queued again, first."""

    run_id: str
    kind: QueueKind
    messages: tuple[Queued, ...]


@dataclass(frozen=True, slots=True)
class RunEnded:
    """The run's end, told before its terminal event is delivered; `dangling` are the
    results that pair calls the run left unanswered; `steering` and `follow_ups` what its
    queues had not delivered (queued again, first)."""

    run_id: str
    terminal: Event
    dangling: tuple[Message, ...]
    steering: tuple[Queued, ...] = ()
    follow_ups: tuple[Queued, ...] = ()


@dataclass(frozen=True, slots=True)
class CommitFailed:
    """A batch of the run's history did not reach session memory (the store failed): these
    messages, the very objects the history holds, will never be in the store."""

    run_id: str
    messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class CarriedStored:
    """The run handed the history's unstored kept prompt (a crashed incarnation's) to the
    session writer with its first batch: the actor stops carrying it."""

    run_id: str


@dataclass(frozen=True, slots=True)
class RunBroke:
    """The run's own code failed (a bug): the actor must not go on as if nothing happened."""

    reason: str


@dataclass(frozen=True, slots=True)
class PromptRendered:
    """The run rendered the agent's Template system prompt (`state()` shows the text)."""

    text: str


@dataclass(frozen=True, slots=True)
class HistoryLoaded:
    """A restarted incarnation's history, read off the loop (and the turn it had parked
    waiting for approvals, a `ParkedTurn`, or None)."""

    messages: tuple[Message, ...]
    sequence: int
    parked: Any = None
    unstored: tuple[Message, ...] = ()  # the kept prompt at its end, not in memory yet


def as_tuple(messages: Sequence[Message]) -> tuple[Message, ...]:
    return messages if isinstance(messages, tuple) else tuple(messages)
