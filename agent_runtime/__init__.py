"""agent-runtime: LLM agents as pykka actors under an OTP-style supervision tree.

This module is the whole public surface; see DESIGN.md for the contract.
"""

from agent_runtime._errors import (
    AgentRuntimeError,
    AlreadyRegistered,
    ConfigError,
    RunCanceled,
    RunFailed,
    StreamClosed,
    StreamOverflow,
)
from agent_runtime._key import AgentKey
from agent_runtime.abort import Aborted, AbortSignal, AbortTable
from agent_runtime.config import RuntimeConfig, load_config
from agent_runtime.registry import AgentRegistry
from agent_runtime.runtime import Runtime

__all__ = [
    "AbortSignal",
    "AbortTable",
    "Aborted",
    "AgentKey",
    "AgentRegistry",
    "AgentRuntimeError",
    "AlreadyRegistered",
    "ConfigError",
    "RunCanceled",
    "RunFailed",
    "Runtime",
    "RuntimeConfig",
    "StreamClosed",
    "StreamOverflow",
    "load_config",
]
