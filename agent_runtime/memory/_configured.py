"""The session memory a runtime configuration describes, compaction trigger included."""

from __future__ import annotations

from agent_runtime.config import RuntimeConfig
from agent_runtime.llm.factory import from_config
from agent_runtime.memory._memory import SessionMemory


def open_session_memory(config: RuntimeConfig) -> SessionMemory:
    """`SessionMemory.from_config(config.memory)`, compacting automatically
    (`SessionMemory.auto_compact`) when `memory.compact_above_bytes` is set, with the model of
    the profile `memory.compaction_profile`.

    The model is built before the store is opened, so a profile that cannot be built leaves
    nothing open behind the error.

    Raises:
        ConfigError: the compaction profile's model cannot be built (its kind is not
            registered, its API key variable is not set: see `agent_runtime.llm.from_config`).
        ValueError, MemoryStoreError: as `SessionMemory.from_config`.
    """
    memory_config = config.memory
    above_bytes = memory_config.compact_above_bytes
    model = None
    if above_bytes is not None:
        # RuntimeConfig checked that the profile is named and exists.
        model = from_config(memory_config.compaction_profile, config=config)
    memory = SessionMemory.from_config(memory_config)
    if model is not None and above_bytes is not None:
        memory.auto_compact(model, above_bytes=above_bytes)
    return memory
