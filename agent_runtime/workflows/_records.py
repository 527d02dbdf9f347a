"""The stored record of a workflow (`WorkflowRecord`), its step history (`StepRun`) and the
view `runtime.workflows.get` returns (`WorkflowInfo`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, JsonValue

WorkflowStatus = Literal["running", "paused", "completed", "failed", "canceled"]
"""`running` (its current step runs, or will when it is resumed), `paused` (waits in
`ctx.pause` for `resume_with`), and the final `completed`, `failed`, `canceled`."""

InfoStatus = Literal["running", "paused", "completed", "failed", "canceled", "corrupt"]
"""A `WorkflowStatus`, or `corrupt`: the stored record cannot be read (not a valid record, or
a state its model refuses); `WorkflowInfo.error` says why."""

STATUSES: tuple[str, ...] = get_args(WorkflowStatus)
INFO_STATUSES: tuple[str, ...] = get_args(InfoStatus)
FINAL: frozenset[str] = frozenset({"completed", "failed", "canceled"})

StepOutcome = Literal["completed", "failed", "timed_out"]


class StepRun(BaseModel):
    """One attempt of a step that ended: how (`completed`, `failed`, `timed_out`), the error
    of a failed one, and where the workflow went next (None: it ended). An attempt that a
    crash, a restart, a pause or a cancel interrupted has no entry."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step: str
    attempt: int
    outcome: StepOutcome
    error: str | None = None
    next: str | None = None
    started_at: float
    ended_at: float


class Lease(BaseModel):
    """Who runs a workflow: the process `owner` (host, pid and a random part), until
    `expires_at` (a wall-clock time; 0: released). `epoch` grows by one at each takeover;
    every commit is a compare-and-set against the record the owner last committed, so one
    made under an older epoch is refused."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    owner: str
    epoch: int = Field(ge=1)
    expires_at: float


class WorkflowRecord(BaseModel):
    """Everything stored of one workflow, committed as one JSON value at each change.

    `attempt` counts the starts of the current step in this visit (a re-run after a restart
    included); `failures` its failed attempts in a row (what recovery counts); `resumes` the
    values `resume_with` gave to the current step's pauses, in order (replayed to a re-run of
    the step, cleared when it ends); `pause_reason` is set while paused.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    workflow: str
    status: WorkflowStatus
    step: str
    attempt: int = 0
    failures: int = 0
    state: dict[str, Any]
    history: tuple[StepRun, ...] = ()
    resumes: tuple[JsonValue, ...] = ()
    pause_reason: str | None = None
    error: str | None = None
    created_at: float
    updated_at: float
    lease: Lease | None = None


class WorkflowInfo(BaseModel):
    """A snapshot of a workflow, as last committed (`runtime.workflows.get` / `list`).

    `state` is an instance of the workflow's state model (its JSON dict when the workflow's
    class cannot be imported in this process); `step` is the current step (the last one once
    it ended); `attempt` the current step's attempt (0 before its first); `steps` the history
    of ended attempts, oldest first; `error` why it failed; `pause_reason` what it waits for;
    `lease` who runs it (see `Lease`). A record that cannot be read has status `corrupt`,
    `error` saying why, `state` None, and what could be read of the rest (else empty).
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    id: str
    workflow: str
    status: InfoStatus
    step: str
    attempt: int
    state: Any
    steps: tuple[StepRun, ...] = Field(default_factory=tuple)
    pause_reason: str | None = None
    error: str | None = None
    created_at: float
    updated_at: float
    lease: Lease | None = None


@dataclass(frozen=True)
class Corrupt:
    """A stored record that cannot be read: its id, what is wrong, and its JSON if it parsed."""

    id: str
    problem: str
    raw: Any = None

    def info(self) -> WorkflowInfo:
        """The `corrupt` WorkflowInfo of this record (what could be read of it)."""
        raw = self.raw if isinstance(self.raw, dict) else {}

        def text(name: str) -> str:
            value = raw.get(name)
            return value if isinstance(value, str) else ""

        def number(name: str) -> float:
            value = raw.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
            return 0.0

        return WorkflowInfo(
            id=self.id,
            workflow=text("workflow"),
            status="corrupt",
            step=text("step"),
            attempt=0,
            state=None,
            error=self.problem,
            created_at=number("created_at"),
            updated_at=number("updated_at"),
        )
