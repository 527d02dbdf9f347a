"""Workflows (`runtime.workflows`): start, inspect, answer, cancel and resume the durable
workflows of one runtime."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import time
import uuid
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from pydantic import BaseModel, JsonValue

from agent_runtime._loop_guard import refuse_on_loop
from agent_runtime.workflows._errors import (
    InvalidWorkflow,
    WorkflowError,
    WorkflowExists,
    WorkflowFinished,
    WorkflowNotFound,
    WorkflowNotPaused,
)
from agent_runtime.workflows._host import WorkflowHost
from agent_runtime.workflows._records import (
    FINAL,
    STATUSES,
    WorkflowInfo,
    WorkflowRecord,
    WorkflowStatus,
)
from agent_runtime.workflows._runner import CANCEL_GRACE, LiveWorkflow, run_workflow
from agent_runtime.workflows._store import WorkflowStore
from agent_runtime.workflows._workflow import Definition, Workflow, definition, resolve
from supervisors._log import get_logger

T = TypeVar("T")
log = get_logger(__name__)


class Workflows:
    """The durable workflows of one runtime (`runtime.workflows`).

    Store: every workflow is one record (state, current step, attempt, status, history of
    ended attempts, pause reason and answers) in the runtime's session memory store
    (`[memory]`: `SqliteStore` by default, `PostgresStore` when configured), committed
    before each step runs and after it ends; a commit returns only once the store made it
    durable. Store I/O runs on one worker thread of this object, in order, never on the
    event loop.

    Running: each workflow this process runs is a supervised task on the runtime's event loop
    (`loop_tasks`); steps are coroutines on that loop and must not block it.

    Guarantees:
    - after a crash or a stop, `resume()` continues every `running` workflow from its current
      step; that step runs again from its start with the state committed before it (steps
      must be idempotent, or use `ctx.attempt`); a step whose end was committed never runs
      again; a `paused` workflow stays paused until `resume_with`;
    - `stop()` (the runtime's) halts the workflows without changing their records, so a
      later `resume()` goes on where they were;
    - one process at a time should run a store's workflows: there is no lease, so two
      processes calling `resume()` on one database would both run them.

    Sync methods block until the loop answered; their `a`-prefixed twins are for async code
    (also steps and async tools on the runtime's loop, where the sync ones raise).

    Raises (every method):
        RuntimeError: the runtime is stopping, or a sync method was called on the runtime's
            event loop (use the async twin).
        MemoryStoreError: the store failed to read or write.
    """

    def __init__(self, host: WorkflowHost) -> None:
        self._host = host
        self._store = WorkflowStore(host.memory.store)
        self._io = ThreadPoolExecutor(1, thread_name_prefix=f"{host.name}.workflows")
        self._live: dict[str, LiveWorkflow] = {}  # touched only on the event loop's thread
        self._start_lock: asyncio.Lock | None = None
        self._stopping = False

    # -- start ------------------------------------------------------------------------------

    def start(
        self,
        workflow: type[Workflow[Any]],
        state: BaseModel,
        id: str | None = None,
        first: str | None = None,
    ) -> str:
        """Start `workflow` with `state` at step `first` (default: its `initial_step`, else the
        first step declared); returns its id (`id`, or a new `wf-<hex>`), once its first
        record is committed.

        Raises:
            InvalidWorkflow: `workflow` is not a valid Workflow subclass (named).
            TypeError: `state` is not an instance of the workflow's state model, or `id` is
                not a str.
            ValueError: `id` is empty.
            UnknownStep: `first` is not one of its steps.
            WorkflowExists: a workflow with `id` is already stored.
        """
        record, found = self._new_record(workflow, state, id, first)
        return self._sync("start", lambda: self._start(record, found))

    async def astart(
        self,
        workflow: type[Workflow[Any]],
        state: BaseModel,
        id: str | None = None,
        first: str | None = None,
    ) -> str:
        """`start` for async code."""
        record, found = self._new_record(workflow, state, id, first)
        return await self._async(self._start(record, found))

    def _new_record(
        self, workflow: object, state: object, workflow_id: object, first: str | None
    ) -> tuple[WorkflowRecord, Definition]:
        found = definition(workflow)
        if not isinstance(state, found.state_type):
            raise TypeError(
                f"the state of workflow {found.cls.__qualname__} must be a "
                f"{found.state_type.__name__}, not {type(state).__name__}"
            )
        if workflow_id is None:
            workflow_id = f"wf-{uuid.uuid4().hex}"
        elif not isinstance(workflow_id, str):
            raise TypeError(f"invalid workflow id {workflow_id!r} (expected a non-empty str)")
        elif not workflow_id:
            raise ValueError("invalid workflow id '' (expected a non-empty str)")
        step = found.step(first if first is not None else found.first, where="start: first")
        now = time.time()
        record = WorkflowRecord(
            id=workflow_id,
            workflow=found.name,
            status="running",
            step=step.name,
            state=state.model_dump(mode="json"),
            created_at=now,
            updated_at=now,
        )
        return record, found

    async def _start(self, record: WorkflowRecord, found: Definition) -> str:
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            live = self._live.get(record.id)
            stored = live.record if live is not None else await self._read(record.id)
            if stored is not None:
                raise WorkflowExists(record.id, stored.status)
            await self._commit(record)
        log.info("workflow.started", workflow_id=record.id, workflow=record.workflow)
        self._spawn(LiveWorkflow(record, found))
        return record.id

    # -- inspect ----------------------------------------------------------------------------

    def get(self, workflow_id: str) -> WorkflowInfo:
        """The workflow as last committed.

        Raises:
            WorkflowNotFound: no workflow has this id.
        """
        refuse_on_loop(
            "Workflows.get()", "`await runtime.workflows.aget(...)`", on_host_loop="warn"
        )
        return self._info_of(workflow_id, self._store.get(workflow_id))

    async def aget(self, workflow_id: str) -> WorkflowInfo:
        """`get` for async code (the read runs off the loop)."""
        return self._info_of(workflow_id, await self._read(workflow_id))

    def list(self, status: WorkflowStatus | None = None) -> list[WorkflowInfo]:
        """Every stored workflow (with `status`, if given), oldest first.

        Raises:
            ValueError: `status` is not one of running, paused, completed, failed, canceled.
        """
        _check_status(status)
        refuse_on_loop(
            "Workflows.list()", "`await runtime.workflows.alist(...)`", on_host_loop="warn"
        )
        return [_info(r) for r in self._store.all() if status is None or r.status == status]

    async def alist(self, status: WorkflowStatus | None = None) -> builtins.list[WorkflowInfo]:
        """`list` for async code (the read runs off the loop)."""
        _check_status(status)
        records = await asyncio.get_running_loop().run_in_executor(self._io, self._store.all)
        return [_info(r) for r in records if status is None or r.status == status]

    # -- answer, cancel, resume -------------------------------------------------------------

    def resume_with(self, workflow_id: str, value: Any) -> None:
        """Answer the pause the workflow waits in: its `ctx.pause` returns `value` (a JSON
        value; it gets a copy, as a run after a restart would). The answer is committed
        before the step goes on. After a restart the paused step runs again (see
        `StepContext.pause`).

        Raises:
            WorkflowNotFound: no workflow has this id.
            WorkflowNotPaused: it is not paused.
            TypeError: `value` is not JSON.
            WorkflowError: the workflow's class cannot be imported in this process.
        """
        answer = _json_copy(value)
        self._sync("resume_with", lambda: self._resume_with(workflow_id, answer))

    async def aresume_with(self, workflow_id: str, value: Any) -> None:
        """`resume_with` for async code."""
        await self._async(self._resume_with(workflow_id, _json_copy(value)))

    async def _resume_with(self, workflow_id: str, answer: JsonValue) -> None:
        live = self._live.get(workflow_id)
        record = live.record if live is not None else await self._read(workflow_id)
        if record is None:
            raise WorkflowNotFound(workflow_id)
        if record.status != "paused":
            raise WorkflowNotPaused(workflow_id, record.status)
        waiter = live.waiter if live is not None else None
        found = live.definition if live is not None else _definition_of(record)
        answered = record.model_copy(
            update={
                "status": "running",
                "pause_reason": None,
                "resumes": (*record.resumes, answer),
                "updated_at": time.time(),
            }
        )
        await self._commit(answered)
        log.info("workflow.resumed_with", workflow_id=workflow_id, step=record.step)
        if live is not None and waiter is not None and not waiter.done():
            live.record = answered
            waiter.set_result(answer)
        else:
            self._spawn(LiveWorkflow(answered, found))

    def cancel(self, workflow_id: str) -> None:
        """Cancel the workflow: its running step's task is canceled and the runs of the
        agents it used are aborted, then it is committed `canceled` (for good).

        Raises:
            WorkflowNotFound: no workflow has this id.
            WorkflowFinished: it already completed, failed or was canceled.
        """
        self._sync("cancel", lambda: self._cancel(workflow_id))

    async def acancel(self, workflow_id: str) -> None:
        """`cancel` for async code."""
        await self._async(self._cancel(workflow_id))

    async def _cancel(self, workflow_id: str) -> None:
        live = self._live.get(workflow_id)
        record = live.record if live is not None else await self._read(workflow_id)
        if record is None:
            raise WorkflowNotFound(workflow_id)
        if record.status in FINAL:
            raise WorkflowFinished(workflow_id, record.status, action="cancel")
        if live is not None:
            await _halt(live, "workflow_canceled")
            record = live.record
        canceled = record.model_copy(
            update={"status": "canceled", "pause_reason": None, "updated_at": time.time()}
        )
        await self._commit(canceled)
        if live is not None:
            live.record = canceled
        log.info("workflow.canceled", workflow_id=workflow_id, step=record.step)

    def resume(self) -> builtins.list[str]:
        """Continue every stored `running` workflow that this process does not run yet (after
        a crash or a restart): each from its current step, which runs again (see the
        class). Paused workflows stay paused. A workflow whose class cannot be imported here
        is left as it is (logged: `workflow.resume.skipped`). Returns the ids resumed.
        """
        return self._sync("resume", self._resume)

    async def aresume(self) -> builtins.list[str]:
        """`resume` for async code."""
        return await self._async(self._resume())

    async def _resume(self) -> builtins.list[str]:
        records = await asyncio.get_running_loop().run_in_executor(self._io, self._store.all)
        resumed = []
        for record in records:
            if record.status != "running" or record.id in self._live:
                continue
            try:
                found = _definition_of(record)
            except WorkflowError as exc:
                log.warning("workflow.resume.skipped", workflow_id=record.id, error=str(exc))
                continue
            self._spawn(LiveWorkflow(record, found))
            resumed.append(record.id)
        log.info("workflow.resumed", count=len(resumed))
        return resumed

    # -- lifecycle --------------------------------------------------------------------------

    def stop(self, timeout: float = 10.0) -> None:
        """Halt every workflow this process runs, leaving their records as committed (so
        `resume()` goes on after a restart); then refuse new calls. Idempotent. Called by
        `Runtime.stop` before it aborts the agents' runs."""
        if self._stopping:
            return
        self._stopping = True
        with contextlib.suppress(Exception):  # the loop is gone already: nothing runs there
            self._host.submit(self._halt_all(timeout)).result(timeout + 1.0)
        self._io.shutdown(wait=True)

    async def _halt_all(self, timeout: float) -> None:
        lives = list(self._live.values())
        if lives:
            await asyncio.wait_for(
                asyncio.gather(*(_halt(live, "runtime_stopping") for live in lives)), timeout
            )

    # -- plumbing ---------------------------------------------------------------------------

    def _spawn(self, live: LiveWorkflow) -> None:
        self._live[live.record.id] = live
        self._host.submit(self._drive(live))

    async def _drive(self, live: LiveWorkflow) -> None:
        workflow_id = live.record.id
        try:
            await run_workflow(self._host, live, self._commit)
        except asyncio.CancelledError:
            raise
        except Exception:  # the store failed: the workflow stays as last committed
            log.exception("workflow.runner.crashed", workflow_id=workflow_id)
        finally:
            if self._live.get(workflow_id) is live:
                del self._live[workflow_id]

    async def _commit(self, record: WorkflowRecord) -> None:
        await asyncio.get_running_loop().run_in_executor(self._io, self._store.put, record)

    async def _read(self, workflow_id: str) -> WorkflowRecord | None:
        return await asyncio.get_running_loop().run_in_executor(
            self._io, self._store.get, workflow_id
        )

    def _info_of(self, workflow_id: str, record: WorkflowRecord | None) -> WorkflowInfo:
        if record is None:
            raise WorkflowNotFound(workflow_id)
        return _info(record)

    def _sync(self, what: str, coro: Callable[[], Coroutine[Any, Any, T]]) -> T:
        refuse_on_loop(
            f"Workflows.{what}()", f"`await runtime.workflows.a{what}(...)`", on_host_loop="warn"
        )
        self._refuse_stopping()
        return _unwrapped(self._host.submit(_captured(coro())).result())

    async def _async(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._stopping:
            coro.close()
            self._refuse_stopping()
        if asyncio.get_running_loop() is self._host.loop_tasks.loop:
            return await coro
        return _unwrapped(await asyncio.wrap_future(self._host.submit(_captured(coro))))

    def _refuse_stopping(self) -> None:
        if self._stopping:
            raise RuntimeError(f"runtime {self._host.name!r} is stopping: workflows are halted")

    def __repr__(self) -> str:
        return f"<Workflows of {self._host.name}>"


async def _halt(live: LiveWorkflow, reason: str) -> None:
    """Stop `live`'s runner (its step's task canceled, its agents' runs aborted with
    `reason`) and wait for it to end; it commits nothing more."""
    live.halted = True
    live.halt_reason = reason
    if live.task is not None:
        live.task.cancel()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(live.ended.wait(), CANCEL_GRACE + 1.0)


def _definition_of(record: WorkflowRecord) -> Definition:
    cls = resolve(record.workflow)
    if cls is None:
        raise WorkflowError(
            f"workflow {record.id!r}: its class {record.workflow} cannot be imported in this "
            "process (define it at a module's top level and import it before resuming)"
        )
    return definition(cls)


def _info(record: WorkflowRecord) -> WorkflowInfo:
    state: Any = record.state
    cls = resolve(record.workflow)
    if cls is not None:
        with contextlib.suppress(InvalidWorkflow, ValueError):
            state = definition(cls).state_type.model_validate(record.state)
    return WorkflowInfo(
        id=record.id,
        workflow=record.workflow,
        status=record.status,
        step=record.step,
        attempt=record.attempt,
        state=state,
        steps=record.history,
        pause_reason=record.pause_reason,
        error=record.error,
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


def _check_status(status: object) -> None:
    if status is not None and status not in STATUSES:
        raise ValueError(
            f"unknown workflow status {status!r} (expected one of: {', '.join(STATUSES)})"
        )


def _json_copy(value: Any) -> JsonValue:
    try:
        copied: JsonValue = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"resume_with value {value!r} is not JSON ({exc})") from None
    return copied


async def _captured(coro: Coroutine[Any, Any, T]) -> tuple[T | None, Exception | None]:
    """`coro`'s result or its error as a value: an error meant for the caller (a finished
    workflow, say) is raised there, not also logged as a failed task of the loop."""
    try:
        return await coro, None
    except Exception as exc:
        return None, exc


def _unwrapped(outcome: tuple[T | None, Exception | None]) -> T:
    result, error = outcome
    if error is not None:
        raise error
    return result  # type: ignore[return-value]
