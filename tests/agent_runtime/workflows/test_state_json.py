"""A state that is not JSON is refused, naming the field: a step that leaves one fails (its
recovery applies, also after a restart) instead of leaving the workflow `running` for ever, and
NaN or an infinity is never stored as null."""

from __future__ import annotations

import time

import pytest

from agent_runtime import Runtime
from agent_runtime.workflows import InvalidState
from agent_runtime.workflows._records import WorkflowRecord
from agent_runtime.workflows._store import WorkflowStore
from tests.agent_runtime.workflows.flows import Log, Loose, NotJsonState
from tests.agent_runtime.workflows.helpers import wait_status


def test_a_step_leaving_a_non_json_state_fails_naming_the_field(runtime: Runtime) -> None:
    wf = runtime.workflows.start(NotJsonState, Loose(), id="nj")
    info = wait_status(runtime, wf, "failed")
    assert Log.events == ["put:1", "put:2", "put:3"]  # each failure retried, then failed
    errors = [run.error or "" for run in info.steps]
    assert "InvalidState" in errors[0] and "field 'anything'" in errors[0]
    assert "field 'score'" in errors[1] and "nan" in errors[1]
    assert "anything['xs'][1]" in errors[2] and "inf" in errors[2]
    assert info.state == Loose()  # nothing of the bad states was committed
    assert "anything['xs'][1]" in (info.error or "")


def test_a_resumed_step_leaving_a_non_json_state_fails_too(runtime: Runtime) -> None:
    # as a crash would leave it: running at `put`, attempt 2 interrupted
    now = time.time()
    WorkflowStore(runtime.memory.store).put(
        WorkflowRecord(
            id="nj",
            workflow="tests.agent_runtime.workflows.flows:NotJsonState",
            status="running",
            step="put",
            attempt=1,
            failures=1,
            state={"n": 0, "anything": None, "score": 0.0},
            created_at=now,
            updated_at=now,
        )
    )
    assert runtime.workflows.resume() == ["nj"]
    info = wait_status(runtime, "nj", "failed")
    assert Log.events == ["put:2", "put:3"]
    assert "field 'score'" in (info.steps[0].error or "")


def test_start_refuses_a_state_with_nan_naming_the_field(runtime: Runtime) -> None:
    with pytest.raises(InvalidState, match=r"field 'score'.*nan"):
        runtime.workflows.start(NotJsonState, Loose(score=float("nan")))
    with pytest.raises(InvalidState, match="field 'anything'"):
        runtime.workflows.start(NotJsonState, Loose(anything={1, object()}))
    assert runtime.workflows.list() == []
