"""What the examples share: a configuration that keeps them offline, quiet and free of files.

Not an example itself. Session memory lives in process memory (`store = "memory"`) unless an
example says otherwise, and only errors are logged, so each example's own output stays
readable. A real application would rather keep the defaults of `config/runtime.toml`.
"""

from __future__ import annotations

from agent_runtime import RuntimeConfig
from agent_runtime.config import MemoryConfig, TelemetryConfig


def quiet_config(memory: MemoryConfig | None = None) -> RuntimeConfig:
    """Defaults, with in-memory session memory (or `memory`) and only errors logged."""
    return RuntimeConfig(
        memory=memory or MemoryConfig(store="memory"),
        telemetry=TelemetryConfig(log_level="error"),
    )
