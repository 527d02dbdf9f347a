"""After a step timed out, its retry starts once the aborted run of its agent has ended (not
at once, into `AgentBusy`), within the step's deadline."""

from __future__ import annotations

import pytest

from agent_runtime import Runtime
from tests.agent_runtime.workflows.flows import Counter, Log, SlowAbort
from tests.agent_runtime.workflows.helpers import wait_status


@pytest.mark.timing
def test_a_retry_after_a_timeout_waits_for_the_aborted_run(runtime: Runtime) -> None:
    SlowAbort.calls = 0
    wf = runtime.workflows.start(SlowAbort, Counter())
    info = wait_status(runtime, wf, "completed")
    assert Log.events == ["call:1", "call:2"]
    assert [(r.outcome, r.attempt) for r in info.steps] == [("timed_out", 1), ("completed", 2)]
    assert info.state.notes == ["ok"]
    assert SlowAbort.calls == 2
