"""The cluster registry's actor: the one table of every agent of the cluster, by key.

It runs as one named Ray actor with a concurrency of one, so its methods run one at a time
and each is atomic: of several `reserve` calls for the same key, from any thread, process or
node, exactly one wins (the cluster-wide twin of `AgentRegistry`'s guarantee). Placement is
decided in that same step, so two agents of a new session racing each other still land on
one node under `session_affinity`.

An entry is `starting` from `reserve` until the node that runs the agent `confirm`s it with
its incarnation (a fresh id per start of a node actor), `live` after. Lookups see live
entries only; uniqueness counts both. A node that restarted (or died for good) lost its
agents: `claim_lost` hands the lost entries to exactly one caller, dropping `temporary` ones
and re-placing `transient` ones on a live node (their options travel with the entry).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from agent_runtime._key import AgentKey
from agent_runtime.cluster._placement import NodeLoad, Placement, place


@dataclass
class Entry:
    """One agent of the cluster (plain data: it crosses to callers)."""

    key: AgentKey
    node: str
    restart: str
    options: bytes | None  # kept for `transient` agents only: what a recovery starts again
    token: int
    incarnation: str | None = None  # of the node running it; None while starting

    @property
    def live(self) -> bool:
        return self.incarnation is not None


@dataclass(frozen=True)
class Reserved:
    """`reserve`'s answer: the key is ours under `token`, to be started on `node`."""

    node: str
    token: int


@dataclass(frozen=True)
class Taken:
    """`reserve`'s answer: the key is held, by an agent on `node` (None while it starts)."""

    node: str | None


class RegistryActor:
    """The state of the cluster registry (see the module docstring); one caller at a time."""

    def __init__(self) -> None:
        self._entries: dict[AgentKey, Entry] = {}
        self._incarnations: dict[str, str] = {}  # node -> its current incarnation
        self._tokens = itertools.count(1)

    # -- nodes ------------------------------------------------------------------------------

    def node_up(self, node: str, incarnation: str) -> None:
        """A node actor (re)started with a new `incarnation` (told by the node itself)."""
        self._incarnations[node] = incarnation

    def incarnations(self) -> dict[str, str]:
        """Every node's current incarnation, as the nodes last told."""
        return dict(self._incarnations)

    def agents_per_node(self) -> dict[str, int]:
        """Agents (live or starting) per node."""
        counts: dict[str, int] = {}
        for entry in self._entries.values():
            counts[entry.node] = counts.get(entry.node, 0) + 1
        return counts

    # -- keys -------------------------------------------------------------------------------

    def reserve(
        self,
        key: AgentKey,
        restart: str,
        options: bytes | None,
        placement: Placement,
        running: dict[str, int],
        node: str | None = None,
    ) -> Reserved | Taken:
        """Take `key` for a new agent, on `node` or on the one `placement` picks among the
        nodes of `running` (running runs per live node); `Taken` if an entry holds it."""
        held = self._entries.get(key)
        if held is not None:
            return Taken(held.node if held.live else None)
        if node is None:
            node = self._place(key.session, placement, running)
        entry = Entry(key, node, restart, options, next(self._tokens))
        self._entries[key] = entry
        return Reserved(node, entry.token)

    def _place(self, session: str, placement: Placement, running: dict[str, int]) -> str:
        agents = self.agents_per_node()
        loads = {n: NodeLoad(agents.get(n, 0), r) for n, r in running.items()}
        holding = sorted({e.node for e in self._entries.values() if e.key.session == session})
        return place(placement, session, loads, holding)

    def confirm(self, key: AgentKey, token: int, incarnation: str) -> bool:
        """The agent reserved under `token` runs on its node's `incarnation`; False if the
        reservation is gone (released, or its node was lost meanwhile)."""
        entry = self._entries.get(key)
        if entry is None or entry.token != token:
            return False
        entry.incarnation = incarnation
        return True

    def release(self, key: AgentKey, token: int | None = None) -> bool:
        """Drop the entry under `key` (only the one of `token`, when given)."""
        entry = self._entries.get(key)
        if entry is None or (token is not None and entry.token != token):
            return False
        del self._entries[key]
        return True

    def exited(self, key: AgentKey, node: str, incarnation: str) -> bool:
        """The agent under `key` ended on `node`'s `incarnation` (told by the node)."""
        entry = self._entries.get(key)
        if entry is None or entry.node != node or entry.incarnation != incarnation:
            return False
        del self._entries[key]
        return True

    def lookup(self, key: AgentKey) -> Entry | None:
        """The live entry under `key`, or None (a copy, without its options)."""
        entry = self._entries.get(key)
        return _public(entry) if entry is not None and entry.live else None

    def find(self, key: AgentKey) -> Entry | None:
        """The entry under `key`, live or starting, or None (a copy, without its options)."""
        entry = self._entries.get(key)
        return None if entry is None else _public(entry)

    def entries(self) -> list[Entry]:
        """Every live entry, sorted by key (copies, without their options)."""
        return [_public(e) for _, e in sorted(self._entries.items()) if e.live]

    # -- node loss ----------------------------------------------------------------------------

    def claim_lost(
        self, node: str, incarnation: str | None, placement: Placement, running: dict[str, int]
    ) -> list[tuple[Entry, Reserved]]:
        """Take the entries `node` lost: those confirmed by an incarnation other than
        `incarnation` (its current one; None: the node is gone for good).

        `temporary` ones are dropped; `transient` ones are re-placed among the nodes of
        `running` and returned reserved (`Reserved`) to the one caller that got them, which
        starts and confirms each. A second caller for the same loss gets nothing.
        """
        lost = [
            e
            for e in self._entries.values()
            if e.node == node and e.live and e.incarnation != incarnation
        ]
        claimed: list[tuple[Entry, Reserved]] = []
        for entry in lost:
            del self._entries[entry.key]
            if entry.restart != "transient" or not running:
                continue
            target = self._place(entry.key.session, placement, running)
            again = Entry(entry.key, target, entry.restart, entry.options, next(self._tokens))
            self._entries[entry.key] = again
            claimed.append((again, Reserved(target, again.token)))
        return claimed


def _public(entry: Entry) -> Entry:
    return Entry(entry.key, entry.node, entry.restart, None, entry.token, entry.incarnation)
