"""ClusterHost: what handles, subscriptions and facades need of their ClusterRuntime."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, Unpack

from agent_runtime._key import AgentKey
from agent_runtime.agent import AgentOptionsDict
from agent_runtime.cluster._registry_actor import Entry


class ClusterHost(Protocol):
    """The runtime side of a `ClusterAgent` (implemented by `ClusterRuntime`)."""

    def start_agent(
        self,
        key: AgentKey | tuple[str, str, int],
        *,
        node: str | None = None,
        output_type: Any = None,
        on_failure: Callable[[Exception], Any] | None = None,
        **options: Unpack[AgentOptionsDict],
    ) -> Any:
        """Start an agent (a ClusterAgent)."""

    def _entry(self, key: AgentKey) -> Entry | None:
        """The live registry entry under `key`, or None."""

    def _entries(self) -> list[Entry]:
        """Every live registry entry, sorted by key."""

    def _node_actor(self, name: str) -> Any:
        """The Ray actor handle of node `name`."""

    def _locate(self, key: AgentKey) -> tuple[Any, str]:
        """(node actor, incarnation) of the live agent under `key` (AgentStopped if none)."""

    def _whereabouts(self, key: AgentKey, incarnation: str) -> str:
        """`moved`, `waiting` or `gone`, for a reader whose node `incarnation` was lost."""

    def _opened(self, sub: Any) -> None:
        """Count a new subscription (closed by the runtime's stop)."""

    def _stop_agent(self, key: AgentKey) -> bool:
        """Stop the agent under `key`; False if none ran."""
