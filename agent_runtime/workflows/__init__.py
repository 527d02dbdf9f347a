"""Durable workflows that orchestrate agents: state machines whose steps call agents, each step
with a timeout and a recovery strategy, committed to the session store so that they survive a
restart and can pause for a human.

```python
from agent_runtime.workflows import Workflow, step, StepContext, max_retries

class Trip(Workflow[TripState]):            # TripState: a pydantic model
    @step(timeout=60.0, recovery=max_retries(2).failover_to("error"))
    async def suggest(self, ctx: StepContext) -> None:
        answer = await ctx.agent(("trip", "activity", 0)).arun(self.state.query)
        self.state = self.state.model_copy(update={"answer": answer.text})
        ctx.transition_to("approve")         # or ctx.end()

    @step()
    async def approve(self, ctx: StepContext) -> None:
        decision = await ctx.pause("needs approval")   # what resume_with gave
        ctx.end() if decision == "ok" else ctx.transition_to("suggest")

wf_id = runtime.workflows.start(Trip, TripState(query="..."), id=None, first="suggest")
runtime.workflows.get(wf_id)          # WorkflowInfo: state, step, status, attempt, steps
runtime.workflows.list(status=None)   # "running" | "paused" | "completed" | "failed" | "canceled"
runtime.workflows.resume_with(wf_id, "ok")
runtime.workflows.cancel(wf_id)
runtime.workflows.resume()            # after a restart: continue every unfinished workflow
```

Guarantees, each one a test checks:
- the state, the current step and its attempt are committed (durably) before each step runs
  and after it ends, in the runtime's session store: SQLite by default, Postgres when
  `[memory] store = "postgres"`;
- after a crash (even SIGKILL) or a stop, `resume()` continues every running workflow from
  its current step: nothing committed is lost, and a step whose end was committed never runs
  again; the interrupted step runs again from its start, so steps must be idempotent or use
  `ctx.attempt`;
- a step's timeout cancels its task and aborts the runs of the agents it used; its recovery
  (`max_retries(n).failover_to(step)`, else `Workflow.default_recovery`) retries it from the
  state committed before it, then fails over; with no recovery left the workflow is `failed`
  with the error;
- `ctx.pause(reason)` commits `paused`; it stays paused across restarts until
  `resume_with(id, value)`, whose value `pause` returns (after a restart, by a re-run of the
  step that replays the stored answer);
- a step that leaves a state that is not JSON (an object, NaN, an infinity) fails with
  `InvalidState` naming the field (its recovery applies); after a step timeout, recovery goes
  on once the aborted runs of its agents have ended (for at most the step's timeout);
- a lease per workflow (owner, epoch, expiry) lets several processes share a store: only the
  lease holder runs a workflow, `resume()` takes over expired ones, and commits are
  compare-and-sets, so a step's result commits once and a stale owner's commit is refused;
- a record that cannot be read is listed as `corrupt` (with its id) and skipped;
- `cancel` ends a workflow for good; workflows run as supervised tasks on the runtime's event
  loop and never block it (store I/O runs on a worker thread).
"""

from agent_runtime.workflows._context import StepAgent, StepContext
from agent_runtime.workflows._errors import (
    InvalidState,
    InvalidWorkflow,
    LeaseLost,
    StepTimeout,
    UnknownStep,
    WorkflowCorrupt,
    WorkflowError,
    WorkflowExists,
    WorkflowFinished,
    WorkflowNotFound,
    WorkflowNotPaused,
)
from agent_runtime.workflows._host import WorkflowHost
from agent_runtime.workflows._records import StepRun, WorkflowInfo, WorkflowStatus
from agent_runtime.workflows._recovery import Recovery, max_retries
from agent_runtime.workflows._step import step
from agent_runtime.workflows._workflow import Workflow
from agent_runtime.workflows._workflows import Workflows

__all__ = [
    "InvalidState",
    "InvalidWorkflow",
    "LeaseLost",
    "Recovery",
    "StepAgent",
    "StepContext",
    "StepRun",
    "StepTimeout",
    "UnknownStep",
    "Workflow",
    "WorkflowCorrupt",
    "WorkflowError",
    "WorkflowExists",
    "WorkflowFinished",
    "WorkflowHost",
    "WorkflowInfo",
    "WorkflowNotFound",
    "WorkflowNotPaused",
    "WorkflowStatus",
    "Workflows",
    "max_retries",
    "step",
]
