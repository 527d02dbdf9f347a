"""Workflow records live in every memory store kind (SQLite, Postgres, in memory), and a
workflow survives a restart on Postgres as it does on SQLite."""

from __future__ import annotations

from agent_runtime import Runtime, load_config
from agent_runtime.memory import MemoryStore, PostgresStore
from agent_runtime.workflows._records import StepRun, WorkflowRecord
from agent_runtime.workflows._store import SESSION, WorkflowStore
from tests.agent_runtime.workflows.flows import Approval, Counter, Log
from tests.agent_runtime.workflows.helpers import wait_status


def record(workflow_id: str, created_at: float, **update: object) -> WorkflowRecord:
    base = WorkflowRecord(
        id=workflow_id,
        workflow="m:W",
        status="running",
        step="a",
        state={"n": 1},
        created_at=created_at,
        updated_at=created_at,
    )
    return base.model_copy(update=update)


def test_records_round_trip_and_list_across_workflows(store: MemoryStore) -> None:
    workflows = WorkflowStore(store)
    run = StepRun(step="a", attempt=1, outcome="completed", next="b", started_at=1, ended_at=2)
    second = record("two", 2.0, history=(run,), resumes=("ok", {"k": [1]}))
    workflows.put(second)
    workflows.put(record("one", 1.0))
    assert workflows.get("two") == second
    assert workflows.get("three") is None
    assert [r.id for _, r in workflows.all()] == ["one", "two"]
    workflows.put(second.model_copy(update={"status": "completed"}))  # replaces
    assert [getattr(r, "status", None) for _, r in workflows.all()] == ["running", "completed"]
    # kept apart from the sessions' histories: no history appears for the records
    assert SESSION not in store.sessions()


def test_a_paused_workflow_survives_a_restart_on_postgres(postgres_dsn: str) -> None:
    env = {"AGENT_RUNTIME_MEMORY__STORE": "postgres", "AGENT_RUNTIME_MEMORY__DSN": postgres_dsn}
    config = load_config(None, env=env)
    with Runtime.start(config) as first:
        assert isinstance(first.memory.store, PostgresStore)
        wf_id = first.workflows.start(Approval, Counter())
        wait_status(first, wf_id, "paused")
    with Runtime.start(config) as second:
        assert second.workflows.get(wf_id).status == "paused"
        second.workflows.resume_with(wf_id, "ok")
        info = wait_status(second, wf_id, "completed")
    assert info.state.notes == ["prepare", "decision:ok"]
    assert Log.events.count("prepare:1") == 1
