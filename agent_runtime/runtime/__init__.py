"""The runtime: the root supervision tree of agents, and the subagents facade over it."""

from agent_runtime.runtime._runtime import CHILD_IDS, Runtime
from agent_runtime.runtime._subagents import Subagents

__all__ = ["CHILD_IDS", "Runtime", "Subagents"]
