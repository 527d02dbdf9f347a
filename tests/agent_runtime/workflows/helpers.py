"""Waits on workflow records, with deadlines."""

from __future__ import annotations

from agent_runtime import Runtime
from agent_runtime.testing import wait_until
from agent_runtime.workflows import WorkflowInfo


def wait_status(
    runtime: Runtime, workflow_id: str, status: str, timeout: float = 10.0
) -> WorkflowInfo:
    """The workflow's info once its committed status is `status`."""
    wait_until(
        lambda: runtime.workflows.get(workflow_id).status == status,
        timeout=timeout,
        what=f"workflow {workflow_id} {status}",
    )
    return runtime.workflows.get(workflow_id)
