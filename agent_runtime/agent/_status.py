"""What an agent publishes of itself for `Runtime.tree()`: immutable snapshots, swapped whole.

The actor publishes an `ActorStatus` from its handlers (a run started, facts applied, a
reset), the run a `RunProgress` at each step of its run that is not a token (turn
start, answer start and end, tool start and end, retry, end). Each is one reference
assignment on the `AgentCell`, so a reader on any thread takes the latest one without
waiting for the agent; it may be a few milliseconds behind (a fact still in flight to the
actor is not in it yet).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Phase = Literal["starting", "waiting", "streaming", "retrying", "running", "ending"]
"""Where a run is between tools: `waiting` for the model's first chunk, `streaming` an
answer, `retrying` after a failed attempt, `running` between an answer and what follows."""


@dataclass(frozen=True, slots=True)
class ActorStatus:
    """The actor's state as it last published it (`AgentCell.status`)."""

    run_id: str | None  # of the running run; None when idle
    error: str | None  # why the last run failed, until the next starts
    steering: int  # steering messages queued now
    follow_ups: int  # follow-up messages queued now


@dataclass(frozen=True, slots=True)
class RunProgress:
    """A run as it last published itself (`AgentCell.progress`)."""

    run_id: str
    turn: int  # turns started so far in this run
    phase: Phase
    # Names of the tools running now, in start order: the run's pending tool calls as its
    # run sees them (the actor hears of them a message later).
    tools: tuple[str, ...] = ()


def activity(
    stopped: bool, status: ActorStatus | None, progress: RunProgress | None, delegating: bool
) -> str:
    """What an agent is doing, for a live view: `stopped`, `idle`, `starting`, `waiting for
    model`, `streaming`, `retrying`, `tool:<name>[,<name>...]`, `waiting on subagent` (in a
    tool while a subagent it started runs: `delegating`), `running` or `ending`."""
    if stopped:
        return "stopped"
    if status is None or status.run_id is None:
        return "idle"
    if progress is None or progress.run_id != status.run_id:
        return "starting"  # the run has not published itself yet
    if progress.tools:
        if delegating:
            return "waiting on subagent"
        return "tool:" + ",".join(dict.fromkeys(progress.tools))
    if progress.phase == "waiting":
        return "waiting for model"
    return progress.phase
