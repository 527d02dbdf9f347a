"""Tool approvals of an agent: what waits, who decided, and what is kept in session memory.

- `PendingApproval` / `ApprovalDecision`: the public records (pydantic, JSON round-trip).
- `RunApprovals`: a run's side (the loop's `Approver`): the futures its waiting calls
  await, told to the actor (`ApprovalRequested`, `ApprovalWithdrawn`) and kept, with the
  turn they belong to, in a reserved session's state until the turn commits.
- `ApprovalBook`: the actor's side: the calls that wait, the decisions taken, and a turn
  parked by an earlier incarnation (read from session memory at its start).
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
import weakref
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from agent_runtime._errors import ApprovalError, ApprovalsPending
from agent_runtime._key import AgentKey
from agent_runtime.agent._history import pending_prompt_key
from agent_runtime.agent._protocol import ApprovalRequested, ApprovalWithdrawn
from agent_runtime.agent._storage import forget_prompt, read_history
from agent_runtime.loop._approval import Decision
from agent_runtime.loop._resume import ResumedTurn
from agent_runtime.memory import SessionMemory
from agent_runtime.messages import AssistantMessage, Message, ToolCall, ToolResult
from agent_runtime.tools import Tool, ToolArgumentsError, find_tool

PENDING_APPROVALS = "agent_runtime.pending_approvals"
"""The reserved session whose key-value state keeps each agent's turn that waits for
approvals (its answer, the calls that wait, the decisions, the results so far) until the turn
commits; keyed like the pending prompts (`pending_prompt_key`)."""


class PendingApproval(BaseModel):
    """A tool call waiting for `Agent.approve` / `Agent.deny` (JSON round-trippable).

    `agent` is the key of the agent whose run waits (`Runtime.pending_approvals()` lists
    those of every agent); `requested_at` is a Unix time in seconds."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    tool_call_id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    requested_at: float
    agent: AgentKey | None = None


class ApprovalDecision(BaseModel):
    """What was decided on one waiting call, and by whom (`by`, None when not told)."""

    model_config = ConfigDict(frozen=True)

    tool_call_id: str
    approved: bool
    args: dict[str, Any] | None = None
    reason: str | None = None
    by: str | None = None
    decided_at: float = Field(default_factory=time.time)

    def as_decision(self) -> Decision:
        return Decision(self.approved, self.args, self.reason, self.by)


class ParkedTurn(BaseModel):
    """A turn whose calls wait for approval, as kept in session memory."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    lead: list[Message] = Field(default_factory=list)
    message: AssistantMessage
    pending: list[PendingApproval] = Field(default_factory=list)
    decisions: dict[str, ApprovalDecision] = Field(default_factory=dict)
    started: list[str] = Field(default_factory=list)
    results: dict[str, ToolResult] = Field(default_factory=dict)

    def waiting(self) -> list[PendingApproval]:
        """The calls still without a decision, in the order they asked."""
        return [p for p in self.pending if p.tool_call_id not in self.decisions]

    def resumed(self) -> ResumedTurn:
        return ResumedTurn(
            tuple(self.lead), self.message, frozenset(self.started), dict(self.results)
        )


# -- storage (off the loop: on the session writer's threads, or a starting caller's) ----------


def store_parked(memory: SessionMemory, key: AgentKey, record: dict[str, Any] | None) -> None:
    """Keep (or, with None, forget) the agent's parked turn."""
    state = memory.kv(PENDING_APPROVALS)
    if record is None:
        state.delete(pending_prompt_key(*key))
    else:
        state.put(pending_prompt_key(*key), record)


def read_parked(
    memory: SessionMemory, key: AgentKey, messages: tuple[Message, ...]
) -> tuple[tuple[Message, ...], ParkedTurn | None]:
    """The agent's parked turn, if one is kept and its answer is not in `messages` (the
    history as read) already; with the history less the tail the turn's `lead` repeats (the
    kept prompt), which the resumed turn commits."""
    raw = memory.kv(PENDING_APPROVALS).get(pending_prompt_key(*key))
    if raw is None:
        return messages, None
    parked = ParkedTurn.model_validate(raw)
    ids = {c.id for c in parked.message.tool_calls}
    for message in messages:
        if isinstance(message, AssistantMessage) and any(c.id in ids for c in message.tool_calls):
            return messages, None  # committed with its turn after all
    lead = parked.lead
    for size in range(min(len(lead), len(messages)), 0, -1):
        if list(messages[len(messages) - size :]) == lead[:size]:
            return messages[: len(messages) - size], parked
    return messages, parked


# -- the run's side --------------------------------------------------------------------------------


class RunHost(Protocol):
    """What `RunApprovals` needs of its `AgentRun`."""

    run_id: str
    crashed: str | None

    def _tell(self, message: Any) -> None: ...


class TurnUnit(Protocol):
    """Where `RunApprovals` reads the messages of the turn being assembled."""

    unit: list[Message]


class RunApprovals:
    """A run's waiting calls (the loop's `Approver`), on the agent's loop.

    Guarantees: the actor hears of a call that waits before the `ToolApprovalRequested`
    event is handed out, and of a call that stopped waiting without a decision (a timeout,
    an abort); while a turn has calls waiting, it is kept in session memory (in the
    session's order, rewritten at each change) and forgotten when the turn commits; nothing
    is written once the run's actor crashed (the restarted one reads the turn as it was).
    """

    def __init__(
        self,
        run: RunHost,
        key: AgentKey,
        writer: Any,
        turn: TurnUnit,
        parked: ParkedTurn | None,
    ) -> None:
        # Weak: the run owns its approvals, and a reference back would make every run a
        # reference cycle, garbage only the cyclic collector frees (39 objects per text turn;
        # its collections cost 7-10% of a turn's CPU, and pause the loop for tens of ms).
        # The run outlives every call here: they come from its task or from its actor.
        self.run: RunHost = weakref.proxy(run)
        self.key = key
        self.writer = writer  # the SessionWriter, or None when the agent does not write
        self.turn = turn
        self.parked = parked
        self.resume = parked.resumed() if parked is not None else None
        self.futures: dict[str, asyncio.Future[Decision]] = {}
        self.record: ParkedTurn | None = None  # the turn kept while calls wait
        self.stored = parked is not None  # a kept turn to forget when this turn commits
        # A resumed turn keeps what its earlier incarnations did: kept again (a call of it
        # waits anew), a later restart must not run a call that ended already.
        self.started: list[str] = list(parked.started) if parked is not None else []
        self.results: dict[str, ToolResult] = dict(parked.results) if parked is not None else {}

    # -- the loop's Approver ------------------------------------------------------------------

    def decided(self, call_id: str) -> Decision | None:
        parked = self.parked
        decision = parked.decisions.get(call_id) if parked is not None else None
        return decision.as_decision() if decision is not None else None

    def request(self, call: ToolCall) -> asyncio.Future[Decision]:
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self.futures[call.id] = future
        pending = PendingApproval(
            run_id=self.run.run_id,
            tool_call_id=call.id,
            name=call.name,
            args=dict(call.arguments),
            requested_at=time.time(),
            agent=self.key,
        )
        self.run._tell(ApprovalRequested(self.run.run_id, pending))
        record = self.record
        if record is None and self.parked is not None:  # the resumed turn, with its decisions
            record = self.parked.model_copy(update={"run_id": self.run.run_id})
        if record is None:
            unit = self.turn.unit
            message = unit[-1] if unit else None
            if isinstance(message, AssistantMessage):
                record = ParkedTurn(run_id=self.run.run_id, lead=unit[:-1], message=message)
        if record is not None:
            self._keep(record.model_copy(update={"pending": [*record.pending, pending]}))
        return future

    def withdraw(self, call_id: str, decision: Decision | None) -> None:
        self.futures.pop(call_id, None)
        self.run._tell(ApprovalWithdrawn(self.run.run_id, call_id, decision))

    # -- from the actor -------------------------------------------------------------------------

    def decide(self, decision: ApprovalDecision) -> bool:
        """Hand a human's decision to the waiting call; False when it no longer waits."""
        future = self.futures.pop(decision.tool_call_id, None)
        if future is None or future.done():
            return False
        future.set_result(decision.as_decision())
        record = self.record
        if record is not None:
            decisions = {**record.decisions, decision.tool_call_id: decision}
            self._keep(record.model_copy(update={"decisions": decisions}))
        return True

    # -- from the run's events --------------------------------------------------------------------

    def tool_started(self, call_id: str) -> None:
        self.started.append(call_id)

    def tool_ended(self, call_id: str, result: ToolResult) -> None:
        self.results[call_id] = result
        if self.record is not None:
            self._keep(self.record)

    def turn_committed(self) -> None:
        """The turn is in session memory (its append is queued first): forget what was kept
        of it, and the prompt it answered."""
        self.started, self.results = [], {}
        self.record = None
        if self.stored and self.writer is not None and self.run.crashed is None:
            self.stored = False
            memory, key = self.writer.memory, self.key
            self.writer.submit(key.session, functools.partial(store_parked, memory, key, None))
            if self.parked is not None:  # its lead held the kept prompt: committed now
                self.writer.submit(key.session, functools.partial(forget_prompt, memory, key))
        self.parked = None

    def _keep(self, record: ParkedTurn) -> None:
        record = record.model_copy(update={"started": list(self.started), "results": self.results})
        self.record = record
        if self.writer is None or self.run.crashed is not None:
            return
        self.stored = True
        data = record.model_dump(mode="json")
        memory, key = self.writer.memory, self.key
        self.writer.submit(key.session, functools.partial(store_parked, memory, key, data))


# -- the actor's side ------------------------------------------------------------------------------


class ApprovalBook:
    """The actor's record of its approvals: the calls waiting (of its run, or of a turn an
    earlier incarnation parked), and the decisions taken on them."""

    def __init__(self) -> None:
        self.pending: dict[str, PendingApproval] = {}  # of the running run
        self.decided: dict[str, ApprovalDecision] = {}  # since the last run started
        self.parked: ParkedTurn | None = None

    def listing(self) -> list[PendingApproval]:
        """Every call waiting, in the order it asked."""
        if self.parked is not None:
            return self.parked.waiting()
        return list(self.pending.values())

    def check_start(self, key: AgentKey, continuing: bool) -> ParkedTurn | None:
        """The parked turn a `continue_run` resumes (None without one).

        Raises:
            ApprovalsPending: a turn is parked and this is a prompt, or a call of it still
                waits for a decision.
        """
        parked = self.parked
        if parked is None:
            return None
        waiting = [p.tool_call_id for p in parked.waiting()]
        if waiting or not continuing:
            raise ApprovalsPending(key, parked.run_id, waiting)
        self.parked = None
        return parked

    def run_started(self) -> None:
        self.pending = {}
        self.decided = {}

    def requested(self, pending: PendingApproval) -> None:
        self.pending[pending.tool_call_id] = pending

    def withdrawn(self, call_id: str, decision: Decision | None) -> None:
        if self.pending.pop(call_id, None) is not None and decision is not None:
            self.decided[call_id] = ApprovalDecision(
                tool_call_id=call_id,
                approved=decision.approved,
                reason=decision.reason,
                by=decision.by,
            )

    def run_ended(self) -> None:
        self.pending = {}

    def decide(
        self,
        call_id: str,
        approved: bool,
        args: dict[str, Any] | None,
        reason: str | None,
        by: str | None,
        tools: tuple[Tool, ...],
    ) -> tuple[ApprovalDecision, ParkedTurn | None]:
        """Record a decision on a waiting call; the decision, and the parked turn it changed
        (to be kept again), if the call belongs to one.

        Raises:
            ApprovalError: the call does not wait (unknown, or decided already), or `args`
                do not validate for the call's tool.
        """
        waiting = {p.tool_call_id: p for p in self.listing()}
        pending = waiting.get(call_id)
        if pending is None:
            earlier = self.decided.get(call_id)
            if earlier is None and self.parked is not None:
                earlier = self.parked.decisions.get(call_id)
            ids = list(waiting)
            if earlier is not None:
                what = "approved" if earlier.approved else f"denied ({earlier.reason})"
                by = f" by {earlier.by}" if earlier.by else ""
                raise ApprovalError(
                    f"tool call {call_id!r} was already decided: {what}{by}; waiting: {ids!r}",
                    call_id,
                    ids,
                    "decided",
                )
            raise ApprovalError(
                f"no tool call {call_id!r} waits for approval; waiting: {ids!r}", call_id, ids
            )
        if args is not None:
            try:  # they replace the model's in the stored answer: JSON, as the model's are
                args = json.loads(json.dumps(args, allow_nan=False))
            except (TypeError, ValueError) as exc:
                raise ApprovalError(
                    f"the new arguments of tool call {call_id!r} are not JSON values: {exc}",
                    call_id,
                    list(waiting),
                    "invalid_args",
                ) from exc
            tool = find_tool(tools, pending.name)
            if tool is not None:
                try:
                    tool.validate_arguments(args)
                except ToolArgumentsError as exc:
                    raise ApprovalError(
                        f"the new arguments of tool call {call_id!r} are invalid: "
                        f"{exc.describe(tool.name)}",
                        call_id,
                        list(waiting),
                        "invalid_args",
                    ) from exc
        decision = ApprovalDecision(
            tool_call_id=call_id,
            approved=approved,
            args=dict(args) if args is not None else None,
            reason=reason,
            by=by,
        )
        self.decided[call_id] = decision
        parked = self.parked
        if parked is not None:
            self.parked = parked.model_copy(
                update={"decisions": {**parked.decisions, call_id: decision}}
            )
            return decision, self.parked
        self.pending.pop(call_id, None)
        return decision, None


def read_agent(
    memory: SessionMemory, key: AgentKey, policy: Any, reason: str
) -> tuple[tuple[Message, ...], int, ParkedTurn | None, tuple[Message, ...]]:
    """`read_history`, with the turn the agent had parked waiting for approvals (when its
    policy reads and writes); the last item is `read_history`'s unstored kept prompt."""
    messages, sequence, unstored = read_history(memory, key, policy, reason)
    if not (policy.read and policy.write):
        return messages, sequence, None, unstored
    messages, parked = read_parked(memory, key, messages)
    if parked is not None:  # the resumed turn commits the kept prompt (its `lead`)
        unstored = ()
    return messages, sequence, parked, unstored
