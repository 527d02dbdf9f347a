"""What the examples share: a configuration that keeps them offline, quiet and free of files.

Not an example itself. Session memory lives in process memory (`store = "memory"`) unless an
example says otherwise, and only errors are logged, so each example's own output stays
readable. A real application would rather keep the defaults of `config/runtime.toml`.
"""

from __future__ import annotations

import time

from agent_runtime import Runtime, RuntimeConfig
from agent_runtime.config import MemoryConfig, TelemetryConfig
from agent_runtime.workflows import WorkflowInfo


def quiet_config(memory: MemoryConfig | None = None) -> RuntimeConfig:
    """Defaults, with in-memory session memory (or `memory`) and only errors logged."""
    return RuntimeConfig(
        memory=memory or MemoryConfig(store="memory"),
        telemetry=TelemetryConfig(log_level="error"),
    )


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
