"""Workflows (`runtime.workflows`): start, inspect, answer, cancel and resume the durable
workflows of one runtime."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import math
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from pydantic import BaseModel, JsonValue

from agent_runtime._loop_guard import refuse_on_loop
from agent_runtime.workflows._errors import (
    InvalidWorkflow,
    LeaseLost,
    WorkflowCorrupt,
    WorkflowError,
    WorkflowExists,
    WorkflowFinished,
    WorkflowNotFound,
    WorkflowNotPaused,
)
from agent_runtime.workflows._host import WorkflowHost
from agent_runtime.workflows._lease import LEASE_SECONDS, held_elsewhere, new_owner
from agent_runtime.workflows._records import (
    FINAL,
    INFO_STATUSES,
    Corrupt,
    InfoStatus,
    Lease,
    WorkflowInfo,
    WorkflowRecord,
)
from agent_runtime.workflows._runner import CANCEL_GRACE, LiveWorkflow, run_workflow
from agent_runtime.workflows._state_json import state_json
from agent_runtime.workflows._store import Stored, WorkflowStore
from agent_runtime.workflows._workflow import Definition, Workflow, definition, resolve
from supervisors._log import get_logger

T = TypeVar("T")
log = get_logger(__name__)
_LAST = object()  # `_write`'s expected text: the one this process last wrote


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
    - `stop()` (the runtime's) halts the workflows without changing their records (but for
      releasing their leases), so a later `resume()` goes on where they were;
    - several processes may share a store: each workflow has a lease (owner, epoch, expiry,
      renewed every third of `lease_seconds` while it runs, released when it pauses, ends
      or the runtime stops); `resume()` takes only workflows whose lease expired, was
      released, or whose owner is a dead process of this host, with the next epoch; every
      commit is a compare-and-set against the record this process last committed, so after
      a takeover a step may run again but its result commits once, and a stale owner's
      commit is refused (`LeaseLost`: it stops running the workflow, logged
      `workflow.lease.lost`);
    - a record that cannot be read (or whose state fails its model) is reported, never
      raised: logged `workflow.record.corrupt`, listed with status `corrupt`, skipped by
      `resume()`; `cancel` and `resume_with` on it raise `WorkflowCorrupt`.

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
        # One answer or cancel at a time per workflow in this process (`_one_at_a_time`); a
        # lock goes once nobody holds or waits for it. On the loop.
        self._changing: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self._stopping = False
        self._texts: dict[str, str] = {}  # id -> text last committed here; on the I/O thread
        self.owner = new_owner()
        self._lease_seconds = LEASE_SECONDS

    @property
    def lease_seconds(self) -> float:
        """How long this process's leases last without renewal (default 15 s); renewed every
        third of it while a workflow runs. Set it before `start` / `resume`.

        Raises (on set):
            ValueError: not a finite number of seconds > 0.
        """
        return self._lease_seconds

    @lease_seconds.setter
    def lease_seconds(self, seconds: float) -> None:
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not math.isfinite(seconds)
            or seconds <= 0
        ):
            raise ValueError(f"invalid lease_seconds {seconds!r} (expected seconds > 0)")
        self._lease_seconds = float(seconds)

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
            state=state_json(state, where=f"start {found.name}"),
            created_at=now,
            updated_at=now,
            lease=Lease(owner=self.owner, epoch=1, expires_at=0.0),
        )
        return record, found

    async def _start(self, record: WorkflowRecord, found: Definition) -> str:
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            live = self._live.get(record.id)
            if live is not None:
                raise WorkflowExists(record.id, live.record.status)
            try:
                await self._write(record, expected=None)
            except LeaseLost:  # stored already, by this process or another
                found_now = await self._read(record.id)
                status = "corrupt" if isinstance(found_now, Corrupt) else None
                if isinstance(found_now, WorkflowRecord):
                    status = found_now.status
                raise WorkflowExists(record.id, status or "unknown") from None
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

    def list(self, status: InfoStatus | None = None) -> list[WorkflowInfo]:
        """Every stored workflow (with `status`, if given), oldest first; those whose record
        cannot be read come last, with status `corrupt`, their id and the problem in `error`
        (each logged as `workflow.record.corrupt`).

        Raises:
            ValueError: `status` is not one of running, paused, completed, failed, canceled,
                corrupt.
        """
        _check_status(status)
        refuse_on_loop(
            "Workflows.list()", "`await runtime.workflows.alist(...)`", on_host_loop="warn"
        )
        return _listed(self._store.all(), status)

    async def alist(self, status: InfoStatus | None = None) -> builtins.list[WorkflowInfo]:
        """`list` for async code (the read runs off the loop)."""
        _check_status(status)
        stored = await asyncio.get_running_loop().run_in_executor(self._io, self._store.all)
        return _listed(stored, status)

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

    @contextlib.asynccontextmanager
    async def _one_at_a_time(self, workflow_id: str) -> AsyncIterator[None]:
        """Answers and cancels of one workflow, one at a time in this process (another
        process is kept apart by the stored compare-and-set and its lease). Two answers at
        once (a double click, a retried request): the second reads what the first committed
        and is refused as not paused; unserialised, it took the first's commit for another
        process's and halted the runner that had just been given the answer. A cancel and an
        answer at once: the cancel ends it for good either way; unserialised, the answer's
        new runner could complete it after the cancel returned."""
        lock = self._changing.get(workflow_id)
        if lock is None:
            lock = self._changing[workflow_id] = asyncio.Lock()
        async with lock:
            yield

    async def _resume_with(self, workflow_id: str, answer: JsonValue) -> None:
        async with self._one_at_a_time(workflow_id):
            await self._answer(workflow_id, answer)

    async def _answer(self, workflow_id: str, answer: JsonValue) -> None:
        stored = await self._read_text(workflow_id)
        if stored is None:
            raise WorkflowNotFound(workflow_id)
        text, record = stored
        if isinstance(record, Corrupt):
            raise WorkflowCorrupt(workflow_id, record.problem, action="resume_with")
        if record.status != "paused":
            raise WorkflowNotPaused(workflow_id, record.status)
        live = self._live.get(workflow_id)
        if live is not None and text != self._texts.get(workflow_id):
            await _halt(live, "workflow_taken_over")  # another process changed it since
            live = None
        waiter = live.waiter if live is not None else None
        found = live.definition if live is not None else _definition_of(record)
        try:
            found.state_type.model_validate(record.state)
        except ValueError as exc:  # ValidationError is one
            problem = "its state fails validation: " + " ".join(str(exc).split())
            raise WorkflowCorrupt(workflow_id, problem, action="resume_with") from None
        answered = record.model_copy(
            update={
                "status": "running",
                "pause_reason": None,
                "resumes": (*record.resumes, answer),
                "updated_at": time.time(),
                "lease": self._taken(record),
            }
        )
        try:
            await self._write(answered, expected=text)
        except LeaseLost:
            raise WorkflowNotPaused(workflow_id, "changed by another process") from None
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
        async with self._one_at_a_time(workflow_id):
            await self._cancel_now(workflow_id)

    async def _cancel_now(self, workflow_id: str) -> None:
        live = self._live.get(workflow_id)
        if live is not None:
            await _halt(live, "workflow_canceled")
        while True:  # a compare-and-set against what is stored: again if it changed meanwhile
            stored = await self._read_text(workflow_id)
            if stored is None:
                raise WorkflowNotFound(workflow_id)
            text, record = stored
            if isinstance(record, Corrupt):
                raise WorkflowCorrupt(workflow_id, record.problem, action="cancel")
            if record.status in FINAL:
                raise WorkflowFinished(workflow_id, record.status, action="cancel")
            canceled = record.model_copy(
                update={
                    "status": "canceled",
                    "pause_reason": None,
                    "updated_at": time.time(),
                    "lease": self._taken(record),
                }
            )
            try:
                await self._write(canceled, expected=text)
            except LeaseLost:
                continue
            break
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
        stored = await asyncio.get_running_loop().run_in_executor(self._io, self._store.all)
        resumed = []
        for text, record in stored:
            if isinstance(record, Corrupt):
                log.warning("workflow.resume.skipped", workflow_id=record.id, error=record.problem)
                continue
            if record.status != "running" or record.id in self._live:
                continue
            if held_elsewhere(record.lease, self.owner, time.time()):
                log.info(
                    "workflow.resume.leased",
                    workflow_id=record.id,
                    owner=record.lease.owner if record.lease else None,
                )
                continue
            try:
                found = _definition_of(record)
                found.state_type.model_validate(record.state)
            except (WorkflowError, ValueError) as exc:  # ValidationError is a ValueError
                log.warning("workflow.resume.skipped", workflow_id=record.id, error=str(exc))
                continue
            taken = record.model_copy(update={"lease": self._taken(record)})
            try:
                await self._write(taken, expected=text)
            except LeaseLost:  # another process took it first
                continue
            log.info("workflow.lease.taken", workflow_id=record.id, epoch=_epoch(taken))
            self._spawn(LiveWorkflow(taken, found))
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
        loop = asyncio.get_running_loop()
        for live in lives:  # so that the next process resumes them at once
            with contextlib.suppress(Exception):
                await loop.run_in_executor(self._io, self._release_io, live.record.id)

    # -- plumbing ---------------------------------------------------------------------------

    def _spawn(self, live: LiveWorkflow) -> None:
        self._live[live.record.id] = live
        self._host.submit(self._drive(live))

    async def _drive(self, live: LiveWorkflow) -> None:
        workflow_id = live.record.id
        renewing = asyncio.ensure_future(self._renew(live))
        try:
            await run_workflow(self._host, live, self._commit)
        except asyncio.CancelledError:
            if not live.lease_lost:
                raise
        except LeaseLost:
            log.warning("workflow.lease.lost", workflow_id=workflow_id)
        except Exception:  # the store failed: the workflow stays as last committed
            log.exception("workflow.runner.crashed", workflow_id=workflow_id)
        finally:
            renewing.cancel()
            if self._live.get(workflow_id) is live:
                del self._live[workflow_id]

    async def _renew(self, live: LiveWorkflow) -> None:
        """Renew `live`'s lease every third of `lease_seconds` while it runs; when the lease
        was lost (another process took the workflow over), halt it: it commits nothing more."""
        loop = asyncio.get_running_loop()
        workflow_id = live.record.id
        while not live.halted:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                await loop.run_in_executor(self._io, self._renew_io, workflow_id)
            except LeaseLost:
                log.warning("workflow.lease.lost", workflow_id=workflow_id)
                live.lease_lost = True
                await _halt(live, "workflow_lease_lost")
                return
            except Exception as exc:  # the store failed: try again at the next renewal
                log.warning("workflow.lease.renew_failed", workflow_id=workflow_id, error=str(exc))

    async def _commit(self, record: WorkflowRecord) -> None:
        """Commit `record` over the one this process last committed (see `_write_io`)."""
        await self._write(record, expected=_LAST)

    async def _write(self, record: WorkflowRecord, *, expected: str | object | None) -> None:
        await asyncio.get_running_loop().run_in_executor(self._io, self._write_io, record, expected)

    def _write_io(self, record: WorkflowRecord, expected: str | object | None) -> None:
        """On the I/O thread: store `record`, with this process's lease stamped on it (expiring
        `lease_seconds` from now while running, released otherwise), if the stored text is
        `expected` (`_LAST`: the text this process last wrote for it).

        Raises:
            LeaseLost: the stored record is another (taken over or changed elsewhere).
        """
        if expected is _LAST:
            if record.id not in self._texts:
                raise LeaseLost(record.id)
            expected = self._texts[record.id]
        assert expected is None or isinstance(expected, str)
        epoch = record.lease.epoch if record.lease is not None else 1
        expires = time.time() + self.lease_seconds if record.status == "running" else 0.0
        stamped = record.model_copy(
            update={"lease": Lease(owner=self.owner, epoch=epoch, expires_at=expires)}
        )
        text = stamped.model_dump_json()
        if not self._store.compare_and_set(record.id, expected, text):
            self._texts.pop(record.id, None)
            raise LeaseLost(record.id)
        self._texts[record.id] = text

    def _renew_io(self, workflow_id: str) -> None:
        """On the I/O thread: push the lease's expiry of a running workflow this process last
        committed `lease_seconds` ahead (a compare-and-set, like every commit)."""
        text = self._texts.get(workflow_id)
        if text is None:
            raise LeaseLost(workflow_id)
        record = WorkflowRecord.model_validate_json(text)
        if record.status == "running":
            self._write_io(record, text)

    def _release_io(self, workflow_id: str) -> None:
        """On the I/O thread: release the lease of a workflow this process halted (its expiry
        set to 0), so that another process resumes it without waiting."""
        text = self._texts.pop(workflow_id, None)
        if text is None:
            return
        record = WorkflowRecord.model_validate_json(text)
        if record.status == "running" and record.lease is not None:
            released = record.model_copy(
                update={"lease": record.lease.model_copy(update={"expires_at": 0.0})}
            )
            self._store.compare_and_set(workflow_id, text, released.model_dump_json())

    def _taken(self, record: WorkflowRecord) -> Lease:
        """The lease this process takes `record` with: the next epoch."""
        return Lease(owner=self.owner, epoch=_epoch(record) + 1, expires_at=0.0)

    async def _read(self, workflow_id: str) -> WorkflowRecord | Corrupt | None:
        return await asyncio.get_running_loop().run_in_executor(
            self._io, self._store.get, workflow_id
        )

    async def _read_text(self, workflow_id: str) -> Stored | None:
        return await asyncio.get_running_loop().run_in_executor(
            self._io, self._store.read, workflow_id
        )

    def _info_of(self, workflow_id: str, record: WorkflowRecord | Corrupt | None) -> WorkflowInfo:
        if record is None:
            raise WorkflowNotFound(workflow_id)
        return record.info() if isinstance(record, Corrupt) else _info(record)

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


def _epoch(record: WorkflowRecord) -> int:
    return record.lease.epoch if record.lease is not None else 0


def _listed(stored: builtins.list[Stored], status: str | None) -> builtins.list[WorkflowInfo]:
    infos = [r.info() if isinstance(r, Corrupt) else _info(r) for _, r in stored]
    return [info for info in infos if status is None or info.status == status]


def _info(record: WorkflowRecord) -> WorkflowInfo:
    """The info of `record`; `corrupt` when its state fails its model's validation."""
    state: Any = record.state
    cls = resolve(record.workflow)
    if cls is not None:
        try:
            state = definition(cls).state_type.model_validate(record.state)
        except InvalidWorkflow:
            pass
        except ValueError as exc:  # ValidationError is one
            problem = f"its state fails the validation of {record.workflow}: " + " ".join(
                str(exc).split()
            )
            log.warning("workflow.record.corrupt", workflow_id=record.id, problem=problem)
            return Corrupt(record.id, problem, record.model_dump(mode="json")).info()
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
        lease=record.lease,
    )


def _check_status(status: object) -> None:
    if status is not None and status not in INFO_STATUSES:
        raise ValueError(
            f"unknown workflow status {status!r} (expected one of: {', '.join(INFO_STATUSES)})"
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
