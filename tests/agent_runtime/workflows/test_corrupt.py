"""A record that cannot be read (not JSON, not a record, or a state its model refuses) is
reported, never raised: logged, listed as `corrupt` with its id, skipped by `resume()`, while
the other workflows resume."""

from __future__ import annotations

import time

import pytest
import structlog

from agent_runtime import Runtime
from agent_runtime.workflows import WorkflowCorrupt, WorkflowExists
from agent_runtime.workflows._records import WorkflowRecord
from agent_runtime.workflows._store import SESSION, WorkflowStore
from tests.agent_runtime.workflows.flows import Counter, Log, Sequence
from tests.agent_runtime.workflows.helpers import wait_status

SEQUENCE = "tests.agent_runtime.workflows.flows:Sequence"


def _running(workflow_id: str, state: dict[str, object]) -> WorkflowRecord:
    now = time.time()
    return WorkflowRecord(
        id=workflow_id,
        workflow=SEQUENCE,
        status="running",
        step="a",
        state=state,
        created_at=now,
        updated_at=now,
    )


def test_corrupt_records_are_listed_and_skipped_and_the_others_resume(runtime: Runtime) -> None:
    store = runtime.memory.store
    WorkflowStore(store).put(_running("good", {"n": 0, "notes": []}))
    WorkflowStore(store).put(_running("bad-state", {"n": "not a number", "notes": []}))
    store.state_put(SESSION, "not-json", "{oops")
    store.state_put(SESSION, "not-a-record", '{"id": "not-a-record", "status": "weird"}')
    with structlog.testing.capture_logs() as logs:
        infos = runtime.workflows.list()
        assert runtime.workflows.resume() == ["good"]
    assert wait_status(runtime, "good", "completed").state == Counter(n=2, notes=["a", "b"])
    assert Log.events == ["a:1", "b:1"]

    corrupt = {i.id: i for i in infos if i.status == "corrupt"}
    assert set(corrupt) == {"bad-state", "not-json", "not-a-record"}
    assert "n" in (corrupt["bad-state"].error or "")
    assert corrupt["bad-state"].workflow == SEQUENCE and corrupt["bad-state"].state is None
    assert "not JSON" in (corrupt["not-json"].error or "")
    assert "invalid field" in (corrupt["not-a-record"].error or "")
    logged = {e["workflow_id"] for e in logs if e["event"] == "workflow.record.corrupt"}
    assert logged == {"bad-state", "not-json", "not-a-record"}
    skipped = {e["workflow_id"] for e in logs if e["event"] == "workflow.resume.skipped"}
    assert skipped == {"bad-state", "not-json", "not-a-record"}

    assert [i.id for i in runtime.workflows.list("corrupt")] == [
        i.id for i in infos if i.status == "corrupt"
    ]
    assert runtime.workflows.get("bad-state").status == "corrupt"
    assert runtime.workflows.get("not-json").status == "corrupt"
    with pytest.raises(WorkflowCorrupt, match="not-json"):
        runtime.workflows.cancel("not-json")
    with pytest.raises(WorkflowCorrupt, match="not-a-record"):
        runtime.workflows.resume_with("not-a-record", "x")
    with pytest.raises(WorkflowExists, match="corrupt"):
        runtime.workflows.start(Sequence, Counter(), id="not-json")
