"""Bad input gets an error that names the problem, and nothing is started or stored then."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from agent_runtime import Runtime
from agent_runtime.workflows import (
    InvalidWorkflow,
    StepContext,
    UnknownStep,
    Workflow,
    WorkflowExists,
    WorkflowNotFound,
    max_retries,
    step,
)
from tests.agent_runtime.workflows.flows import Approval, Counter, Sequence
from tests.agent_runtime.workflows.helpers import wait_status


class Other(BaseModel):
    x: int = 0


def test_an_unknown_first_step_is_named(runtime: Runtime) -> None:
    with pytest.raises(
        UnknownStep,
        match=r"start: first: workflow Sequence has no step 'c' \(expected one of: a, b\)",
    ):
        runtime.workflows.start(Sequence, Counter(), first="c")
    assert runtime.workflows.list() == []


def test_a_state_that_is_not_the_workflows_model_is_refused(runtime: Runtime) -> None:
    with pytest.raises(TypeError, match="state of workflow Sequence must be a Counter, not Other"):
        runtime.workflows.start(Sequence, Other())
    assert runtime.workflows.list() == []


def test_a_duplicate_id_is_refused(runtime: Runtime) -> None:
    runtime.workflows.start(Approval, Counter(), id="one")
    wait_status(runtime, "one", "paused")
    with pytest.raises(WorkflowExists, match="'one' already exists \\(status paused\\)"):
        runtime.workflows.start(Sequence, Counter(), id="one")
    assert runtime.workflows.get("one").workflow.endswith(":Approval")


@pytest.mark.parametrize(("bad", "error"), [("", ValueError), (3, TypeError)])
def test_a_bad_id_is_refused(runtime: Runtime, bad: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="invalid workflow id"):
        runtime.workflows.start(Sequence, Counter(), id=bad)  # type: ignore[arg-type]


def test_an_unknown_id_is_not_found(runtime: Runtime) -> None:
    with pytest.raises(WorkflowNotFound, match="no workflow with id 'x'"):
        runtime.workflows.get("x")


def test_an_unknown_status_is_named(runtime: Runtime) -> None:
    with pytest.raises(
        ValueError, match="unknown workflow status 'done' \\(expected one of: running, paused"
    ):
        runtime.workflows.list(status="done")  # type: ignore[arg-type]


def test_a_failover_to_a_missing_step_is_named_at_start(runtime: Runtime) -> None:
    class Broken(Workflow[Counter]):
        @step(recovery=max_retries(1).failover_to("eror"))
        async def work(self, ctx: StepContext) -> None:
            ctx.end()

    with pytest.raises(UnknownStep, match=r"step .*Broken.work: failover_to: .* no step 'eror'"):
        runtime.workflows.start(Broken, Counter())


def test_a_class_that_is_no_workflow_or_has_no_state_model_is_refused(runtime: Runtime) -> None:
    class NoState(Workflow):  # type: ignore[type-arg]
        @step()
        async def go(self, ctx: StepContext) -> None:
            ctx.end()

    class NoSteps(Workflow[Counter]):
        pass

    with pytest.raises(InvalidWorkflow, match="expected a subclass of Workflow"):
        runtime.workflows.start(Counter, Counter())  # type: ignore[arg-type]
    with pytest.raises(InvalidWorkflow, match="declares no state model"):
        runtime.workflows.start(NoState, Counter())
    with pytest.raises(InvalidWorkflow, match="declares no step"):
        runtime.workflows.start(NoSteps, Counter())


def test_bad_step_declarations_are_named() -> None:
    with pytest.raises(InvalidWorkflow, match="must be an async def"):

        class Sync(Workflow[Counter]):
            @step()
            def go(self, ctx: StepContext) -> None:
                pass

    with pytest.raises(InvalidWorkflow, match="invalid step timeout 0"):
        step(timeout=0)
    with pytest.raises(InvalidWorkflow, match="invalid step recovery 2"):
        step(recovery=2)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="invalid max_retries -1"):
        max_retries(-1)
    with pytest.raises(TypeError, match="failover_to needs a step name"):
        max_retries(1).failover_to("")


def test_sync_calls_refuse_the_runtimes_loop(runtime: Runtime) -> None:
    async def from_the_loop() -> None:
        runtime.workflows.list()

    with pytest.raises(RuntimeError, match=r"use `await runtime.workflows.alist"):
        runtime.submit(from_the_loop()).result(timeout=10)


def test_calls_after_stop_are_refused() -> None:
    runtime = Runtime.start()
    runtime.workflows.list()
    runtime.stop()
    with pytest.raises(RuntimeError, match="is stopping: workflows are halted"):
        runtime.workflows.start(Sequence, Counter())
    never_used = Runtime.start()
    never_used.stop()
    with pytest.raises(RuntimeError, match="is stopping: workflows are halted"):
        never_used.workflows.resume()
