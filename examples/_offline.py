"""What the workflow examples share: waiting for a workflow to stop running.

Not an example itself.
"""

from __future__ import annotations

import time

from agent_runtime import Runtime
from agent_runtime.workflows import WorkflowInfo


def wait_until_not_running(
    runtime: Runtime, workflow_id: str, timeout: float = 60.0
) -> WorkflowInfo:
    """The workflow once it is no longer running (completed, failed, paused or canceled)."""
    deadline = time.monotonic() + timeout
    while (info := runtime.workflows.get(workflow_id)).status == "running":
        if time.monotonic() > deadline:
            raise TimeoutError(f"workflow {workflow_id} still running after {timeout}s")
        time.sleep(0.02)
    return info
