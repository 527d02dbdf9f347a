"""The cluster's own exception: a node lost under a call."""

from __future__ import annotations

from agent_runtime._errors import AgentRuntimeError
from agent_runtime._key import AgentKey


class NodeLost(AgentRuntimeError):
    """The node running the agent under `key` was lost (died or restarted) during a call, so
    whether the call took effect is unknown. A `transient` agent comes back on a live node
    (`registry.lookup(key)` shows it); a `temporary` one is gone."""

    def __init__(self, key: AgentKey, node: str, cause: str = "") -> None:
        detail = f": {cause}" if cause else ""
        super().__init__(f"the node {node!r} of agent {tuple(key)!r} was lost{detail}")
        self.key = key
        self.node = node
