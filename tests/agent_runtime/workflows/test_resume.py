"""A stop leaves every workflow as committed; `resume()` in a new runtime goes on from the
current step, and never runs a committed step again."""

from __future__ import annotations

import structlog

from agent_runtime import Runtime, RuntimeConfig
from agent_runtime.memory import SqliteStore
from agent_runtime.testing import wait_until
from agent_runtime.workflows._records import WorkflowRecord
from agent_runtime.workflows._store import WorkflowStore
from tests.agent_runtime.workflows.flows import Blocked, Counter, Log, Sequence
from tests.agent_runtime.workflows.helpers import wait_status


def test_a_stop_in_the_middle_of_a_step_is_resumed_after_a_restart() -> None:
    with Runtime.start(RuntimeConfig()) as first:
        wf_id = first.workflows.start(Blocked, Counter(), first="wait")
        wait_until(lambda: "wait:1" in Log.events, timeout=10, what="the step started")
    with Runtime.start(RuntimeConfig()) as second:
        info = second.workflows.get(wf_id)
        assert (info.status, info.step, info.attempt, info.steps) == ("running", "wait", 1, ())
        assert second.workflows.resume() == [wf_id]
        wait_until(lambda: "wait:2" in Log.events, timeout=10, what="the step ran again")
        assert second.workflows.resume() == []  # already running here
        second.workflows.cancel(wf_id)


def test_resume_continues_from_the_committed_step() -> None:
    with Runtime.start(RuntimeConfig()) as rt:
        wf_id = rt.workflows.start(Sequence, Counter())
        wait_status(rt, wf_id, "completed")
        store = WorkflowStore(rt.memory.store)
        # as if the process had died after `a` was committed
        record = store.get(wf_id)
        assert record is not None
        store.put(
            record.model_copy(
                update={
                    "id": "half",
                    "status": "running",
                    "step": "b",
                    "attempt": 0,
                    "state": Counter(n=1, notes=["a"]).model_dump(),
                    "history": record.history[:1],
                }
            )
        )
    Log.reset()
    with Runtime.start(RuntimeConfig()) as rt:
        assert rt.workflows.resume() == ["half"]
        info = wait_status(rt, "half", "completed")
    assert Log.events == ["b:1"]
    assert info.state == Counter(n=2, notes=["a", "b"])


def test_a_workflow_whose_class_cannot_be_found_is_skipped_and_kept() -> None:
    store = SqliteStore(".agent_runtime/memory.sqlite3")
    record = WorkflowRecord(
        id="ghost",
        workflow="no_such_module:Ghost",
        status="running",
        step="x",
        state={},
        created_at=0.0,
        updated_at=0.0,
    )
    WorkflowStore(store).put(record)
    store.close()
    with structlog.testing.capture_logs() as logs, Runtime.start(RuntimeConfig()) as rt:
        assert rt.workflows.resume() == []
        assert rt.workflows.get("ghost").status == "running"
        assert rt.workflows.get("ghost").state == {}
    assert any(e["event"] == "workflow.resume.skipped" for e in logs)
