"""The runtime: the root supervision tree of agents, the subagents facade over it, and the
snapshots of what it is doing (`Runtime.tree()`, `Runtime.stats()`)."""

from agent_runtime.runtime._introspection import (
    AgentStatus,
    RuntimeStats,
    RuntimeTree,
    StatusReport,
    SubscriptionStatus,
    TreeNode,
)
from agent_runtime.runtime._runtime import CHILD_IDS, Runtime
from agent_runtime.runtime._status_socket import fetch_status
from agent_runtime.runtime._subagents import Subagents

__all__ = [
    "CHILD_IDS",
    "AgentStatus",
    "Runtime",
    "RuntimeStats",
    "RuntimeTree",
    "StatusReport",
    "Subagents",
    "SubscriptionStatus",
    "TreeNode",
    "fetch_status",
]
