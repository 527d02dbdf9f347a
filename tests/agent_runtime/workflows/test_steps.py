"""Steps run in order, commit their state, and recover from timeouts and failures as their
recovery says."""

from __future__ import annotations

import pytest

from agent_runtime import Runtime
from agent_runtime.testing import wait_until
from agent_runtime.workflows import WorkflowInfo
from tests.agent_runtime.workflows.flows import (
    AlwaysFails,
    BadTransition,
    Counter,
    DefaultRecovery,
    Delegating,
    Log,
    NoRecovery,
    Sequence,
    SlowThenFast,
    TimedCall,
    Undecided,
    WrongState,
)
from tests.agent_runtime.workflows.helpers import wait_status


def outcomes(info: WorkflowInfo) -> list[tuple[str, int, str]]:
    return [(run.step, run.attempt, run.outcome) for run in info.steps]


def test_sequence_runs_each_step_once_and_commits_the_state(runtime: Runtime) -> None:
    wf_id = runtime.workflows.start(Sequence, Counter(), id="seq-1")
    info = wait_status(runtime, wf_id, "completed")
    assert wf_id == "seq-1"
    assert info.state == Counter(n=2, notes=["a", "b"])
    assert outcomes(info) == [("a", 1, "completed"), ("b", 1, "completed")]
    assert [run.next for run in info.steps] == ["b", None]
    assert Log.events == ["a:1", "b:1"]


def test_start_without_id_makes_one_and_first_picks_the_step(runtime: Runtime) -> None:
    wf_id = runtime.workflows.start(Sequence, Counter(), first="b")
    assert wf_id.startswith("wf-")
    info = wait_status(runtime, wf_id, "completed")
    assert info.state.notes == ["b"]


@pytest.mark.timing
def test_a_step_timeout_triggers_its_recovery(runtime: Runtime) -> None:
    wf_id = runtime.workflows.start(SlowThenFast, Counter())
    info = wait_status(runtime, wf_id, "completed")
    assert outcomes(info) == [("slow", 1, "timed_out"), ("slow", 2, "completed")]
    assert "StepTimeout" in (info.steps[0].error or "")
    # the timed-out attempt's change of the state was never committed
    assert info.state == Counter(n=1, notes=["slow"])


def test_retries_then_failover(runtime: Runtime) -> None:
    wf_id = runtime.workflows.start(AlwaysFails, Counter())
    info = wait_status(runtime, wf_id, "completed")
    assert outcomes(info) == [
        ("flaky", 1, "failed"),
        ("flaky", 2, "failed"),
        ("flaky", 3, "failed"),
        ("error", 1, "completed"),
    ]
    assert info.steps[2].next == "error"
    assert "boom 3" in (info.steps[2].error or "")
    # failed attempts left nothing in the state: the failover step starts from before them
    assert info.state == Counter(n=1, notes=["error"])


def test_the_default_recovery_applies_to_steps_without_their_own(runtime: Runtime) -> None:
    wf_id = runtime.workflows.start(DefaultRecovery, Counter())
    info = wait_status(runtime, wf_id, "completed")
    assert Log.events == ["work:1", "work:2", "fallback:1"]
    assert outcomes(info)[-1] == ("fallback", 1, "completed")


def test_a_step_raising_with_no_recovery_left_fails_the_workflow(runtime: Runtime) -> None:
    wf_id = runtime.workflows.start(NoRecovery, Counter())
    info = wait_status(runtime, wf_id, "failed")
    assert info.error == "step 'only': ValueError: bad thing"
    assert Log.events == ["only:1"]


def test_a_transition_to_a_missing_step_fails_at_once_naming_it(runtime: Runtime) -> None:
    wf_id = runtime.workflows.start(BadTransition, Counter())
    info = wait_status(runtime, wf_id, "failed")
    assert Log.events == ["go:1"]  # no retry: it would make the same choice
    assert "no step 'nowhere'" in (info.error or "")
    assert "expected one of: go" in (info.error or "")


def test_a_step_that_chooses_nothing_fails_the_workflow(runtime: Runtime) -> None:
    info = wait_status(runtime, runtime.workflows.start(Undecided, Counter()), "failed")
    assert "ctx.transition_to(step) or ctx.end()" in (info.error or "")


def test_a_state_that_is_not_the_model_fails_the_workflow(runtime: Runtime) -> None:
    info = wait_status(runtime, runtime.workflows.start(WrongState, Counter()), "failed")
    assert "not a Counter (the workflow's state model)" in (info.error or "")


def test_a_step_timeout_aborts_the_run_of_the_agent_it_used(runtime: Runtime) -> None:
    wf_id = runtime.workflows.start(TimedCall, Counter())
    info = wait_status(runtime, wf_id, "failed")
    assert "StepTimeout" in (info.error or "")
    agent = runtime.registry.lookup((wf_id, "helper", 0))
    assert agent is not None
    wait_until(lambda: not agent.state().is_running, timeout=5, what="the run aborted")
    wait_until(lambda: "model call canceled" in Log.events, timeout=5, what="the model call")


def test_list_filters_by_status(runtime: Runtime) -> None:
    done = runtime.workflows.start(Sequence, Counter())
    wait_status(runtime, done, "completed")
    failed = runtime.workflows.start(NoRecovery, Counter())
    wait_status(runtime, failed, "failed")
    assert [i.id for i in runtime.workflows.list()] == [done, failed]
    assert [i.id for i in runtime.workflows.list(status="failed")] == [failed]
    assert runtime.workflows.list(status="paused") == []


def test_steps_start_and_find_agents_in_the_workflows_session(runtime: Runtime) -> None:
    wf_id = runtime.workflows.start(Delegating, Counter())
    info = wait_status(runtime, wf_id, "completed")
    assert info.state.notes == ["first answer", "second"]
    assert [(role, index) for role, index, _ in runtime.registry.list_by_session(wf_id)] == [
        ("writer", 0)
    ]
