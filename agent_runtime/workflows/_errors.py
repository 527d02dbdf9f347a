"""The errors of workflows: one branch of the agent_runtime tree, each carrying its facts.

```
AgentRuntimeError
  WorkflowError                 root of every workflow error
    InvalidWorkflow (TypeError) a workflow class or a step is declared wrongly (named)
    UnknownStep (ValueError)    a step name the workflow does not have (start, transition)
    WorkflowNotFound (KeyError) no workflow with that id in the store
    WorkflowExists              `start` with an id already taken
    WorkflowNotPaused           `resume_with` on a workflow that is not paused
    WorkflowFinished            `cancel` on a workflow already completed, failed or canceled
    StepTimeout (TimeoutError)  a step ran past its timeout (what its failure records)
    InvalidState (TypeError)    a state that is not JSON (NaN, infinity, an object), field named
    WorkflowCorrupt             a stored record that cannot be read (its id and the problem)
    LeaseLost                   another process took the workflow over: this one commits no more
```
"""

from __future__ import annotations

from agent_runtime._errors import AgentRuntimeError


class WorkflowError(AgentRuntimeError):
    """Root of every error of `agent_runtime.workflows`."""


class InvalidWorkflow(WorkflowError, TypeError):
    """A workflow class or one of its steps is declared wrongly (the message says what)."""


class UnknownStep(WorkflowError, ValueError):
    """A step name the workflow does not have.

    Attributes:
        workflow: the workflow class's name.
        step: the name asked for.
        steps: the names it has.
    """

    def __init__(self, workflow: str, step: str, steps: list[str], *, where: str) -> None:
        super().__init__(
            f"{where}: workflow {workflow} has no step {step!r} "
            f"(expected one of: {', '.join(steps)})"
        )
        self.workflow = workflow
        self.step = step
        self.steps = steps


class WorkflowNotFound(WorkflowError, KeyError):
    """No workflow with this id is in the store.

    Attributes:
        workflow_id: the id asked for.
    """

    def __init__(self, workflow_id: str) -> None:
        super().__init__(f"no workflow with id {workflow_id!r}")
        self.workflow_id = workflow_id

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class WorkflowExists(WorkflowError):
    """`start` was given an id that a stored workflow already has.

    Attributes:
        workflow_id: the id.
        status: the stored workflow's status.
    """

    def __init__(self, workflow_id: str, status: str) -> None:
        super().__init__(f"a workflow with id {workflow_id!r} already exists (status {status})")
        self.workflow_id = workflow_id
        self.status = status


class WorkflowNotPaused(WorkflowError):
    """`resume_with` on a workflow that is not paused.

    Attributes:
        workflow_id: the workflow's id.
        status: its status.
    """

    def __init__(self, workflow_id: str, status: str) -> None:
        super().__init__(
            f"workflow {workflow_id!r} is not paused (status {status}): resume_with only "
            "answers a workflow waiting in ctx.pause(...)"
        )
        self.workflow_id = workflow_id
        self.status = status


class WorkflowFinished(WorkflowError):
    """The workflow already ended (completed, failed or canceled): nothing can change it.

    Attributes:
        workflow_id: the workflow's id.
        status: its final status.
    """

    def __init__(self, workflow_id: str, status: str, *, action: str) -> None:
        super().__init__(f"cannot {action} workflow {workflow_id!r}: it already ended ({status})")
        self.workflow_id = workflow_id
        self.status = status


class StepTimeout(WorkflowError, TimeoutError):
    """A step ran past its `timeout` (time spent paused does not count); its task was
    canceled and the runs of the agents it used were aborted.

    Attributes:
        step: the step's name.
        timeout: its timeout in seconds.
    """

    def __init__(self, step: str, timeout: float) -> None:
        super().__init__(f"step {step!r} timed out after {timeout}s")
        self.step = step
        self.timeout = timeout


class InvalidState(WorkflowError, TypeError):
    """A workflow's state that cannot be committed: a field holds a value that is not JSON (an
    object pydantic cannot serialize, NaN or an infinity) or does not read back through the
    state model. The message names the field. Raised by `start`; a step that leaves such a
    state fails with it (its recovery applies)."""


class WorkflowCorrupt(WorkflowError):
    """A stored workflow record cannot be read: it is not a valid record, or its state fails
    the validation of its workflow's state model. Such a workflow is listed with status
    `corrupt` and skipped by `resume()`.

    Attributes:
        workflow_id: the workflow's id.
        problem: what is wrong with the record.
    """

    def __init__(self, workflow_id: str, problem: str, *, action: str) -> None:
        super().__init__(
            f"cannot {action} workflow {workflow_id!r}: its record is corrupt ({problem})"
        )
        self.workflow_id = workflow_id
        self.problem = problem


class LeaseLost(WorkflowError):
    """A commit of a workflow was refused: its stored record is no longer the one this process
    last committed (another process took the workflow over after this one's lease expired,
    or changed it). This process stops running it and commits nothing more for it.

    Attributes:
        workflow_id: the workflow's id.
    """

    def __init__(self, workflow_id: str) -> None:
        super().__init__(
            f"workflow {workflow_id!r} was taken over or changed by another process: this "
            "process no longer holds its lease, so its commit was refused"
        )
        self.workflow_id = workflow_id
