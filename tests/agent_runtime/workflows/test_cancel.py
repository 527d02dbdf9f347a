"""`cancel` ends a workflow for good: its running step is canceled, its agents' runs aborted."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from agent_runtime import Runtime, RuntimeConfig
from agent_runtime.testing import wait_until
from agent_runtime.workflows import WorkflowFinished, WorkflowNotFound
from tests.agent_runtime.workflows.flows import Approval, Blocked, Counter, Log, Sequence
from tests.agent_runtime.workflows.helpers import wait_status


def test_cancel_stops_a_running_step(runtime: Runtime) -> None:
    wf_id = runtime.workflows.start(Blocked, Counter(), first="wait")
    wait_until(lambda: "wait:1" in Log.events, timeout=10, what="the step started")
    runtime.workflows.cancel(wf_id)
    info = runtime.workflows.get(wf_id)
    assert (info.status, info.step, info.steps) == ("canceled", "wait", ())


def test_cancel_aborts_the_run_of_an_agent_the_step_uses(runtime: Runtime) -> None:
    wf_id = runtime.workflows.start(Blocked, Counter())
    wait_until(lambda: "model called" in Log.events, timeout=10, what="the run started")
    runtime.workflows.cancel(wf_id)
    assert runtime.workflows.get(wf_id).status == "canceled"
    wait_until(lambda: "model call canceled" in Log.events, timeout=5, what="the model call")
    # the committed `prepare` is all the history holds: the canceled attempt left no entry
    assert [run.step for run in runtime.workflows.get(wf_id).steps] == ["prepare"]


def test_cancel_a_paused_workflow_also_after_a_restart() -> None:
    with Runtime.start(RuntimeConfig()) as first:
        wf_id = first.workflows.start(Approval, Counter())
        wait_status(first, wf_id, "paused")
    with Runtime.start(RuntimeConfig()) as second:
        second.workflows.cancel(wf_id)
        assert second.workflows.get(wf_id).status == "canceled"
        assert second.workflows.resume() == []
    with Runtime.start(RuntimeConfig()) as third:
        assert third.workflows.get(wf_id).status == "canceled"


def test_cancel_of_an_ended_or_unknown_workflow_is_refused(runtime: Runtime) -> None:
    wf_id = runtime.workflows.start(Sequence, Counter())
    wait_status(runtime, wf_id, "completed")
    with capture_logs() as logs:
        with pytest.raises(WorkflowFinished, match=r"cannot cancel workflow .* already ended"):
            runtime.workflows.cancel(wf_id)
        with pytest.raises(WorkflowNotFound):
            runtime.workflows.cancel("missing")
    # refused to the caller only: not also logged as a failed task of the runtime's loop
    assert [e for e in logs if e["event"] == "tasks.task.failed"] == []
