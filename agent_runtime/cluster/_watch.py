"""NodeWatcher: pings the nodes, keeps their loads, and recovers what a lost node held.

One thread per `ClusterRuntime`, pinging every node each `interval` (one `info()` call in
flight per node at most, so a restarting node is never flooded). A node answers with its
incarnation: a new one means Ray restarted it and it lost its agents; `ActorDiedError` means
it is gone for good (restarts exhausted). Either way the watcher claims the node's lost
entries from the registry (exactly one claimant cluster-wide, even with several callers) and
starts its `transient` agents again on a live node, where their history comes from the
shared session store; `temporary` ones are dropped from the registry.
"""

from __future__ import annotations

import threading
from typing import Any

from agent_runtime.cluster._node import NodeInfo
from agent_runtime.cluster._placement import Placement
from agent_runtime.cluster._ray import get, import_ray
from agent_runtime.cluster._wire import RemoteError
from supervisors._log import get_logger

log = get_logger(__name__)

CALL_TIMEOUT = 60.0


class NodeWatcher:
    """The nodes' health and loads as last seen, and the recovery of lost nodes."""

    def __init__(
        self,
        nodes: dict[str, Any],
        registry: Any,
        placement: Placement,
        interval: float,
        infos: dict[str, NodeInfo],
    ) -> None:
        self._nodes = nodes  # name -> Ray actor handle
        self._registry = registry
        self._placement = placement
        self._interval = interval
        self._lock = threading.Lock()  # guards the two dicts below; never held on a call
        self._infos: dict[str, NodeInfo] = dict(infos)  # live nodes only
        self._pending: dict[str, Any] = {}  # name -> the ping in flight
        self._dead: set[str] = set()  # gone for good (restarts exhausted): not pinged again
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cluster-watcher", daemon=True)
        self._thread.start()

    def running(self) -> dict[str, int]:
        """Running runs per live node (what placement weighs)."""
        with self._lock:
            return {name: info.running for name, info in self._infos.items()}

    def infos(self) -> dict[str, NodeInfo]:
        """The live nodes as they last answered."""
        with self._lock:
            return dict(self._infos)

    def stop(self) -> None:
        """Stop pinging; waits for the thread (bounded by one round)."""
        self._stop.set()
        self._thread.join(timeout=10.0)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.check()
            except Exception:
                log.exception("cluster.watch.failed")

    def check(self) -> None:
        """One round: ping every node without a ping in flight, read the answers that came."""
        ray = import_ray()
        for name, node in self._nodes.items():
            if name not in self._pending and name not in self._dead:
                self._pending[name] = node.info.remote()
        if not self._pending:
            return
        ready, _ = ray.wait(list(self._pending.values()), num_returns=len(self._pending), timeout=1)
        for name, ref in list(self._pending.items()):
            if ref not in ready:
                continue
            del self._pending[name]
            try:
                info: NodeInfo = ray.get(ref)
            except ray.exceptions.ActorDiedError:
                self._dead.add(name)
                self._lose(name, None)  # gone for good: every agent it held is lost
                continue
            except ray.exceptions.RayActorError:
                with self._lock:  # restarting: not placed on until it answers again
                    self._infos.pop(name, None)
                continue
            with self._lock:
                known = self._infos.get(name)
                self._infos[name] = info
            if known is None or known.incarnation != info.incarnation:
                self._recover(name, info.incarnation)

    def _lose(self, name: str, incarnation: str | None) -> None:
        with self._lock:
            self._infos.pop(name, None)
        log.warning("cluster.node.lost", node=name)
        self._recover(name, incarnation)

    def _recover(self, name: str, incarnation: str | None) -> None:
        """Claim what `name` lost (entries of incarnations other than `incarnation`) and start
        its transient agents again."""
        claimed = get(
            self._registry.claim_lost.remote(name, incarnation, self._placement, self.running()),
            CALL_TIMEOUT,
        )
        for entry, reserved in claimed:
            node = self._nodes[reserved.node]
            try:
                answer = get(node.start_agent.remote(entry.key, entry.options), CALL_TIMEOUT)
            except Exception as exc:
                answer = RemoteError.of(exc)
            if isinstance(answer, RemoteError):
                self._registry.release.remote(entry.key, reserved.token)
                log.error(
                    "cluster.agent.recovery_failed",
                    agent=tuple(entry.key),
                    node=reserved.node,
                    error=str(answer.rebuild()),
                )
                continue
            get(self._registry.confirm.remote(entry.key, reserved.token, answer), CALL_TIMEOUT)
            log.info("cluster.agent.recovered", agent=tuple(entry.key), node=reserved.node)
        if claimed or incarnation is None:
            log.info("cluster.node.recovered", node=name, agents=len(claimed))
