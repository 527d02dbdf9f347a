"""`ctx.pause` commits `paused` and resolves from `resume_with`, in the same runtime and
after a restart; the pause does not count towards the step's timeout."""

from __future__ import annotations

import pytest

from agent_runtime import Runtime, RuntimeConfig
from agent_runtime.workflows import WorkflowNotFound, WorkflowNotPaused
from tests.agent_runtime.workflows.flows import Approval, Counter, Log, Sequence
from tests.agent_runtime.workflows.helpers import wait_status


def test_pause_commits_paused_and_resume_with_answers_it(runtime: Runtime) -> None:
    wf_id = runtime.workflows.start(Approval, Counter())
    info = wait_status(runtime, wf_id, "paused")
    assert (info.step, info.pause_reason) == ("approve", "needs approval")
    assert info.state == Counter(n=1, notes=["prepare"])
    assert runtime.workflows.list(status="paused")[0].id == wf_id
    runtime.workflows.resume_with(wf_id, "ok")
    info = wait_status(runtime, wf_id, "completed")
    assert info.state.notes == ["prepare", "decision:ok"]
    # in the same runtime the step goes on where it paused: it did not run again
    assert Log.events == ["prepare:1", "approve:1", "decision:ok"]


def test_time_spent_paused_does_not_count_towards_the_timeout(runtime: Runtime) -> None:
    wf_id = runtime.workflows.start(Approval, Counter())
    wait_status(runtime, wf_id, "paused")
    # approve's timeout is 1 s: wait past it while paused, on the loop's own clock
    runtime.submit(_sleep(1.3)).result(timeout=10)
    assert runtime.workflows.get(wf_id).status == "paused"
    runtime.workflows.resume_with(wf_id, "ok")
    info = wait_status(runtime, wf_id, "completed")
    assert [run.outcome for run in info.steps] == ["completed", "completed"]


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


def test_an_answer_can_send_the_workflow_back(runtime: Runtime) -> None:
    wf_id = runtime.workflows.start(Approval, Counter())
    wait_status(runtime, wf_id, "paused")
    runtime.workflows.resume_with(wf_id, {"verdict": "no"})
    wait_status(runtime, wf_id, "paused")
    info = runtime.workflows.get(wf_id)
    assert info.state.notes == ["prepare", "decision:{'verdict': 'no'}", "prepare"]
    runtime.workflows.resume_with(wf_id, "ok")
    assert wait_status(runtime, wf_id, "completed").state.n == 4


def test_two_answers_at_once_one_is_taken_and_the_workflow_goes_on_with_it(
    runtime: Runtime,
) -> None:
    # A double click on an approve button: both answers read the paused workflow before
    # either commits. One is taken; the other is refused, and must not stop the first.
    import asyncio

    wf_id = runtime.workflows.start(Approval, Counter())
    wait_status(runtime, wf_id, "paused")

    async def both() -> list[BaseException | None]:
        workflows = runtime.workflows
        answers = (workflows.aresume_with(wf_id, "ok"), workflows.aresume_with(wf_id, "ok too"))
        return list(await asyncio.gather(*answers, return_exceptions=True))

    outcomes = runtime.submit(both()).result(timeout=10)
    refused = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(refused) == 1 and isinstance(refused[0], WorkflowNotPaused)
    taken = "ok" if outcomes[0] is None else "ok too"
    info = wait_status(runtime, wf_id, "completed")
    assert info.state.notes == ["prepare", f"decision:{taken}"]


def test_a_cancel_at_once_with_an_answer_ends_the_workflow_for_good(runtime: Runtime) -> None:
    import asyncio

    for _ in range(5):
        wf_id = runtime.workflows.start(Approval, Counter())
        wait_status(runtime, wf_id, "paused")

        async def both(wf_id: str = wf_id) -> list[BaseException | None]:
            workflows = runtime.workflows
            moves = (workflows.aresume_with(wf_id, "ok"), workflows.acancel(wf_id))
            return list(await asyncio.gather(*moves, return_exceptions=True))

        answered, canceled = runtime.submit(both()).result(timeout=10)
        assert canceled is None  # the cancel returned: the workflow is over for good
        assert answered is None or isinstance(answered, WorkflowNotPaused)
        assert wait_status(runtime, wf_id, "canceled").status == "canceled"
        runtime.submit(asyncio.sleep(0.3)).result(timeout=10)  # an answer's runner, if any
        assert runtime.workflows.get(wf_id).status == "canceled"


def test_pause_and_resume_with_across_a_restart() -> None:
    with Runtime.start(RuntimeConfig()) as first:
        wf_id = first.workflows.start(Approval, Counter(), id="trip")
        wait_status(first, wf_id, "paused")
    with Runtime.start(RuntimeConfig()) as second:  # same working directory: same SQLite file
        assert second.workflows.resume() == []  # a paused workflow stays paused
        info = second.workflows.get(wf_id)
        assert (info.status, info.step, info.pause_reason) == (
            "paused",
            "approve",
            "needs approval",
        )
        second.workflows.resume_with(wf_id, "ok")
        info = wait_status(second, wf_id, "completed")
    # the paused step ran again (attempt 2) and its pause returned the stored answer
    assert Log.events == ["prepare:1", "approve:1", "approve:2", "decision:ok"]
    assert info.state == Counter(n=2, notes=["prepare", "decision:ok"])
    assert [(r.step, r.attempt) for r in info.steps] == [("prepare", 1), ("approve", 2)]


def test_an_answer_given_before_a_restart_is_replayed_after_it() -> None:
    with Runtime.start(RuntimeConfig()) as first:
        wf_id = first.workflows.start(Approval, Counter())
        wait_status(first, wf_id, "paused")
        first.workflows.resume_with(wf_id, "no")  # back to prepare, then paused again
        wait_status(first, wf_id, "paused")
    with Runtime.start(RuntimeConfig()) as second:
        second.workflows.resume_with(wf_id, "ok")
        info = wait_status(second, wf_id, "completed")
    assert info.state.notes == ["prepare", "decision:no", "prepare", "decision:ok"]


def test_resume_with_on_a_workflow_that_is_not_paused_is_refused(runtime: Runtime) -> None:
    wf_id = runtime.workflows.start(Sequence, Counter())
    wait_status(runtime, wf_id, "completed")
    with pytest.raises(WorkflowNotPaused, match=r"'.*' is not paused \(status completed\)"):
        runtime.workflows.resume_with(wf_id, "ok")
    with pytest.raises(WorkflowNotFound, match="no workflow with id 'nope'"):
        runtime.workflows.resume_with("nope", "ok")


def test_resume_with_a_value_that_is_not_json_is_refused(runtime: Runtime) -> None:
    wf_id = runtime.workflows.start(Approval, Counter())
    wait_status(runtime, wf_id, "paused")
    with pytest.raises(TypeError, match=r"resume_with value .* is not JSON"):
        runtime.workflows.resume_with(wf_id, {1, 2})
    assert runtime.workflows.get(wf_id).status == "paused"
