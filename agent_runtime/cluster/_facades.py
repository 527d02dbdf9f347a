"""The cluster's `registry` and `subagents`: the local facades' methods, over the cluster."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any, Unpack

from agent_runtime._key import AgentKey
from agent_runtime.agent import AgentOptionsDict
from agent_runtime.cluster._handle import ClusterAgent
from agent_runtime.cluster._host import ClusterHost
from agent_runtime.registry import _check_text


class ClusterRegistry:
    """Lookups in the cluster registry (one named Ray actor): every live agent of every node.

    Each call is one Ray call to the registry; listings are snapshots sorted by key. An agent
    still starting is not listed (but holds its key: a second start raises
    `AlreadyRegistered`). Bad keys raise `ValueError` naming the bad part, as locally.
    """

    def __init__(self, cluster: ClusterHost) -> None:
        self._cluster = cluster

    def lookup(self, key: AgentKey | tuple[str, str, int]) -> ClusterAgent | None:
        """The agent under `key`, on whichever node, or None."""
        agent_key = AgentKey.of(key)
        entry = self._cluster._entry(agent_key)
        return None if entry is None else ClusterAgent(self._cluster, agent_key, entry.node)

    def lookup_with_metadata(
        self, key: AgentKey | tuple[str, str, int]
    ) -> tuple[ClusterAgent, dict[str, Any]] | None:
        """`(agent, {"node": name, "incarnation": id, "restart": policy})` under `key`, or
        None; the incarnation changes when the agent's node restarted or it moved."""
        agent_key = AgentKey.of(key)
        entry = self._cluster._entry(agent_key)
        if entry is None:
            return None
        agent = ClusterAgent(self._cluster, agent_key, entry.node)
        return agent, {
            "node": entry.node,
            "incarnation": entry.incarnation,
            "restart": entry.restart,
        }

    def list(self) -> builtins.list[tuple[AgentKey, ClusterAgent]]:
        """Every `(key, agent)` of the cluster, sorted by key."""
        return [
            (e.key, ClusterAgent(self._cluster, e.key, e.node)) for e in self._cluster._entries()
        ]

    def list_by_session(self, session: str) -> builtins.list[tuple[str, int, ClusterAgent]]:
        """`(role, index, agent)` of every agent of `session`, sorted."""
        _check_text("session", session)
        return [(k.role, k.index, a) for k, a in self.list() if k.session == session]

    def list_by_role(self, role: str) -> builtins.list[tuple[str, int, ClusterAgent]]:
        """`(session, index, agent)` of every agent with `role`, sorted."""
        _check_text("role", role)
        return [(k.session, k.index, a) for k, a in self.list() if k.role == role]

    def count(self) -> int:
        """How many agents the cluster runs."""
        return len(self._cluster._entries())

    def count_by_session(self, session: str) -> int:
        """How many agents `session` has."""
        return len(self.list_by_session(session))

    def next_index(self, session: str, role: str) -> int:
        """The smallest index of `(session, role)` no live agent holds (racers retry on
        `AlreadyRegistered`, as locally)."""
        _check_text("session", session)
        _check_text("role", role)
        taken = {k.index for k, _ in self.list() if k.session == session and k.role == role}
        index = 0
        while index in taken:
            index += 1
        return index


class ClusterSubagents:
    """Start, stop and list the agents of a cluster (`Runtime.subagents` over nodes)."""

    def __init__(self, cluster: ClusterHost) -> None:
        self._cluster = cluster

    def start(
        self,
        key: AgentKey | tuple[str, str, int],
        *,
        node: str | None = None,
        output_type: Any = None,
        on_failure: Callable[[Exception], Any] | None = None,
        **options: Unpack[AgentOptionsDict],
    ) -> ClusterAgent:
        """Start an agent (same as `ClusterRuntime.start_agent`)."""
        agent: ClusterAgent = self._cluster.start_agent(
            key, node=node, output_type=output_type, on_failure=on_failure, **options
        )
        return agent

    def stop(self, agent_or_key: ClusterAgent | AgentKey | tuple[str, str, int]) -> bool:
        """Stop an agent on its node; False if no such agent was running."""
        key = agent_or_key.key if isinstance(agent_or_key, ClusterAgent) else agent_or_key
        return self._cluster._stop_agent(AgentKey.of(key))

    def list(self) -> builtins.list[ClusterAgent]:
        """Every live agent of the cluster, sorted by key."""
        return [ClusterAgent(self._cluster, e.key, e.node) for e in self._cluster._entries()]

    def count(self) -> int:
        """How many agents are live."""
        return len(self._cluster._entries())

    def stop_all(self) -> int:
        """Stop every agent; returns how many were stopped."""
        return sum(1 for agent in self.list() if self.stop(agent))
