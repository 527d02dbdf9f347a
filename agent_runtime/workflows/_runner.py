"""run_workflow: the step loop of one workflow on the runtime's event loop (commit, run the
step under its timeout, commit what it decided), and the live workflow it drives."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from agent_runtime.workflows._context import StepContext
from agent_runtime.workflows._errors import (
    InvalidState,
    InvalidWorkflow,
    StepTimeout,
    UnknownStep,
)
from agent_runtime.workflows._host import WorkflowHost
from agent_runtime.workflows._pause import PauseGate
from agent_runtime.workflows._records import StepRun, WorkflowRecord
from agent_runtime.workflows._state_json import state_json
from agent_runtime.workflows._step import StepSpec
from agent_runtime.workflows._workflow import Definition, Workflow
from supervisors._log import get_logger

log = get_logger(__name__)

Commit = Callable[[WorkflowRecord], Awaitable[None]]
"""Commits a record to the store (off the loop) and returns once it is durable."""

CANCEL_GRACE = 5.0
"""Seconds a canceled step's task gets to end before it is abandoned (logged)."""


@dataclass
class LiveWorkflow:
    """A workflow this process runs: its last committed record, its runner task, and the
    future its pause waits on. Touched only on the event loop's thread."""

    record: WorkflowRecord
    definition: Definition
    task: asyncio.Task[None] | None = None
    waiter: asyncio.Future[JsonValue] | None = None
    halted: bool = False  # canceled or the runtime stops: the runner commits nothing more
    halt_reason: str = "workflow_canceled"  # the abort reason of its agents' runs then
    lease_lost: bool = False  # halted because another process took it over
    ended: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(frozen=True)
class _Failure:
    error: BaseException
    timed_out: bool = False
    fatal: bool = False  # a mistake in the workflow's code: no retry, no failover


async def run_workflow(host: WorkflowHost, live: LiveWorkflow, commit: Commit) -> None:
    """Run `live` from its current step until it ends, pauses for good (canceled meanwhile)
    or is halted. Each step's start and end is committed before the loop goes on."""
    live.task = asyncio.current_task()
    try:
        if live.halted:
            return
        workflow = live.definition.cls()
        while live.record.status == "running" and not live.halted:
            await _visit(host, live, workflow, commit)
    finally:
        live.ended.set()


async def _visit(
    host: WorkflowHost, live: LiveWorkflow, workflow: Workflow[Any], commit: Commit
) -> None:
    """One attempt of the current step, from its first commit to its last."""
    definition = live.definition
    record = live.record
    started = time.time()
    try:
        spec = definition.step(record.step, where=f"workflow {record.id!r}")
    except UnknownStep as exc:  # the class changed since the record was committed
        await _commit(live, commit, _failed(record, str(exc), started))
        return
    record = record.model_copy(update={"attempt": record.attempt + 1, "updated_at": started})
    await _commit(live, commit, record)
    workflow.state = definition.state_type.model_validate(record.state)

    async def wait_for_answer(reason: str) -> JsonValue:
        paused = live.record.model_copy(
            update={"status": "paused", "pause_reason": reason, "updated_at": time.time()}
        )
        await _commit(live, commit, paused)
        log.info("workflow.paused", workflow_id=record.id, step=spec.name, reason=reason)
        waiter: asyncio.Future[JsonValue] = asyncio.get_running_loop().create_future()
        live.waiter = waiter
        try:
            return await waiter
        finally:
            live.waiter = None

    gate = PauseGate(record.resumes, wait_for_answer)
    ctx = StepContext(
        host=host,
        definition=definition,
        workflow_id=record.id,
        step=spec.name,
        attempt=record.attempt,
        history=record.history,
        gate=gate,
        agent_options=workflow.agent_options,
    )
    failure = await _attempt(workflow, spec, ctx, gate, live)
    if failure is None and not isinstance(workflow.state, definition.state_type):
        failure = _Failure(
            InvalidWorkflow(
                f"step {spec.name!r} set self.state to a {type(workflow.state).__name__}, "
                f"not a {definition.state_type.__name__} (the workflow's state model)"
            ),
            fatal=True,
        )
    state: dict[str, Any] | None = None
    if failure is None:
        try:
            state = state_json(workflow.state, where=f"step {spec.name!r}")
        except InvalidState as exc:  # recovery applies: a retry may leave a JSON state
            log.warning(
                "workflow.step.failed", workflow_id=ctx.workflow_id, step=spec.name, error=str(exc)
            )
            failure = _Failure(exc)
    if failure is None and not ctx.decided:
        failure = _Failure(
            InvalidWorkflow(
                f"step {spec.name!r} returned without choosing what comes next: call "
                "ctx.transition_to(step) or ctx.end()"
            ),
            fatal=True,
        )
    if live.halted:
        return
    record = live.record  # a pause may have committed since
    ended = time.time()
    if failure is None:
        nxt = ctx.next_step
        run = StepRun(
            step=spec.name,
            attempt=record.attempt,
            outcome="completed",
            next=nxt,
            started_at=started,
            ended_at=ended,
        )
        update: dict[str, Any] = {
            "status": "running" if nxt is not None else "completed",
            "step": nxt if nxt is not None else spec.name,
            "attempt": 0 if nxt is not None else record.attempt,
            "failures": 0,
            "state": state,
            "history": (*record.history, run),
            "resumes": (),
            "pause_reason": None,
            "updated_at": ended,
        }
        log.info("workflow.step.completed", workflow_id=record.id, step=spec.name, next=nxt)
        await _commit(live, commit, record.model_copy(update=update))
        return
    await _commit(live, commit, _after_failure(definition, spec, record, failure, started, ended))


async def _attempt(
    workflow: Workflow[Any], spec: StepSpec, ctx: StepContext, gate: PauseGate, live: LiveWorkflow
) -> _Failure | None:
    """Run the step's function once, under its timeout; its failure, or None."""
    task = asyncio.ensure_future(spec.function(workflow, ctx))
    try:
        await _wait(task, gate, spec.timeout, spec.name)
    except StepTimeout as exc:
        await _halt(task, ctx, "workflow_step_timeout")
        log.warning("workflow.step.timed_out", workflow_id=ctx.workflow_id, step=spec.name)
        # what follows (a retry, a failover) must not find the agents busy with the aborted
        # runs: wait for their ends, for at most the step's timeout
        if not await ctx.await_agents_idle(spec.timeout or CANCEL_GRACE):
            log.warning(
                "workflow.step.agents_still_busy", workflow_id=ctx.workflow_id, step=spec.name
            )
        return _Failure(exc, timed_out=True)
    except asyncio.CancelledError:
        await _halt(task, ctx, live.halt_reason)
        raise
    if task.cancelled():
        return _Failure(asyncio.CancelledError(f"step {spec.name!r} was canceled"))
    error = task.exception()
    if error is None:
        return None
    log.warning(
        "workflow.step.failed", workflow_id=ctx.workflow_id, step=spec.name, error=repr(error)
    )
    return _Failure(error, fatal=isinstance(error, UnknownStep | InvalidWorkflow))


async def _wait(
    task: asyncio.Future[None], gate: PauseGate, timeout: float | None, name: str
) -> None:
    """Wait for `task`, raising StepTimeout once it ran `timeout` seconds unpaused."""
    if timeout is None:
        await asyncio.wait({task})
        return
    loop = asyncio.get_running_loop()
    left = timeout
    while not task.done():
        changed = gate.changed()
        try:
            if gate.paused:
                await asyncio.wait({task, changed}, return_when=asyncio.FIRST_COMPLETED)
                continue
            began = loop.time()
            await asyncio.wait({task, changed}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            left -= loop.time() - began
        finally:
            changed.cancel()
        if not task.done() and not gate.paused and left <= 0:
            raise StepTimeout(name, timeout)


async def _halt(task: asyncio.Future[None], ctx: StepContext, reason: str) -> None:
    """Cancel the step's task and abort its agents' runs; wait a little for the task."""
    task.cancel()
    ctx.abort_runs(reason)
    done, _ = await asyncio.wait({task}, timeout=CANCEL_GRACE)
    if not done:
        log.warning("workflow.step.abandoned", workflow_id=ctx.workflow_id, step=ctx.step)
    elif not task.cancelled():
        task.exception()  # retrieved (not logged by asyncio): the timeout or cancel counts


def _after_failure(
    definition: Definition,
    spec: StepSpec,
    record: WorkflowRecord,
    failure: _Failure,
    started: float,
    ended: float,
) -> WorkflowRecord:
    """The record after a failed attempt: retried, failed over, or failed (see Recovery)."""
    error = f"{type(failure.error).__name__}: {failure.error}"
    run = StepRun(
        step=spec.name,
        attempt=record.attempt,
        outcome="timed_out" if failure.timed_out else "failed",
        error=error,
        started_at=started,
        ended_at=ended,
    )
    failures = record.failures + 1
    recovery = definition.recovery(spec)
    decision = "fail" if failure.fatal else recovery.decide(failures)
    history = (*record.history, run)
    base = {"history": history, "pause_reason": None, "updated_at": ended, "status": "running"}
    if decision == "retry":
        log.info("workflow.step.retrying", workflow_id=record.id, step=spec.name, failures=failures)
        return record.model_copy(update={**base, "failures": failures})
    if decision == "failover" and recovery.failover is not None:
        run = run.model_copy(update={"next": recovery.failover})
        log.info(
            "workflow.step.failed_over", workflow_id=record.id, step=spec.name, to=recovery.failover
        )
        return record.model_copy(
            update={
                **base,
                "history": (*record.history, run),
                "step": recovery.failover,
                "attempt": 0,
                "failures": 0,
                "resumes": (),
            }
        )
    log.warning("workflow.failed", workflow_id=record.id, step=spec.name, error=error)
    return record.model_copy(
        update={
            **base,
            "status": "failed",
            "failures": failures,
            "error": f"step {spec.name!r}: {error}",
        }
    )


def _failed(record: WorkflowRecord, error: str, now: float) -> WorkflowRecord:
    return record.model_copy(update={"status": "failed", "error": error, "updated_at": now})


async def _commit(live: LiveWorkflow, commit: Commit, record: WorkflowRecord) -> None:
    """Commit `record` unless the workflow was halted; then it is the live record."""
    if live.halted:
        raise asyncio.CancelledError("workflow halted")
    await commit(record)
    live.record = record
