"""Placement: which node a new agent goes to. One pure rule, testable without Ray."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

Placement = Literal["session_affinity", "least_loaded"]
"""`session_affinity` (the default): every agent of a session goes to the node that already
holds one of the session's agents (session memory and delegation stay local); a session's
first agent goes to the least-loaded node. `least_loaded`: every agent goes to the
least-loaded node."""


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """What a node carries: its live agents and its running runs."""

    agents: int = 0
    running: int = 0


def check_placement(placement: object) -> Placement:
    """`placement` if it is a known policy.

    Raises:
        ValueError: another value (the message lists the policies).
    """
    if placement not in get_args(Placement):
        raise ValueError(
            f"unknown placement {placement!r} (expected one of: {', '.join(get_args(Placement))})"
        )
    return placement  # type: ignore[return-value]  # checked just above


def place(
    placement: Placement,
    session: str,
    loads: Mapping[str, NodeLoad],
    session_nodes: Sequence[str] = (),
) -> str:
    """The node for a new agent of `session`.

    `loads` holds the live nodes (others are never chosen); `session_nodes` the nodes that
    hold agents of `session` now. Least loaded means fewest running runs, then fewest agents,
    then the first name in order (so ties are stable and spread evenly as agents arrive).

    Raises:
        LookupError: no live node.
    """
    if not loads:
        raise LookupError("no live cluster node to place an agent on")
    if placement == "session_affinity":
        for node in session_nodes:
            if node in loads:
                return node
    return min(loads, key=lambda node: (loads[node].running, loads[node].agents, node))
