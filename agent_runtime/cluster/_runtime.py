"""ClusterRuntime: runtimes spread over a Ray cluster, behind the facade of one `Runtime`."""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import Any, Unpack

from agent_runtime._errors import AgentStopped, AlreadyRegistered
from agent_runtime._key import AgentKey
from agent_runtime.agent import AgentOptionsDict
from agent_runtime.cluster._errors import NodeLost
from agent_runtime.cluster._facades import ClusterRegistry, ClusterSubagents
from agent_runtime.cluster._handle import ClusterAgent
from agent_runtime.cluster._node import NodeActor, NodeInfo
from agent_runtime.cluster._placement import Placement, check_placement
from agent_runtime.cluster._ray import get, import_ray, node_failure
from agent_runtime.cluster._registry_actor import Entry, RegistryActor, Reserved
from agent_runtime.cluster._subscription import ClusterSubscription
from agent_runtime.cluster._watch import NodeWatcher
from agent_runtime.cluster._wire import RemoteError, pack_options
from agent_runtime.config import RuntimeConfig, load_config
from supervisors._log import get_logger

log = get_logger(__name__)

START_TIMEOUT = 120.0  # seconds for the nodes to start (a node is a new Python process)
CALL_TIMEOUT = 60.0
NODE_CONCURRENCY = 10_000  # calls a node runs at once (async actor: one coroutine each)
_names = itertools.count(1)


class ClusterRuntime:
    """Agents spread over the nodes of a Ray cluster, with `Runtime`'s API for what crosses
    processes: `start_agent`, `registry` (`lookup`, `lookup_with_metadata`, `list`,
    `list_by_session`, `list_by_role`, `count`, ...), `subagents` (`start`, `stop`, `list`,
    `count`, `stop_all`) and `stop()`.

    Each node is a Ray actor hosting one local `Runtime` (started from this runtime's config)
    with many agents; the cluster registry is one named Ray actor whose table gives the local
    registry's guarantee cluster-wide: a key is held by one agent at most, and of racing
    starts of one key (any threads, processes or nodes) exactly one wins, the others get
    `AlreadyRegistered`. Placement: `session_affinity` (default: every agent of a session on
    the node of its first, so session memory and delegation stay local) or `least_loaded`
    (fewest running runs, then fewest agents); `start_agent(..., node=name)` pins one.

    What travels: options (model, tools, guardrails, ...) are pickled (Ray's cloudpickle)
    and unpickled on the node, so tools and models must be importable there: defined at
    module level of a module installed on every node (or sent with Ray's `runtime_env`),
    holding no locks, sockets or open files (give such a class a `__reduce__`, or omit
    `model=` to build the config's `[llm] default_profile` on the node). A tool that cannot
    be pickled is refused by `start_agent` with a `TypeError` naming it. Events cross as
    JSON, in batches pulled by the reader (see `ClusterSubscription`).

    Node loss: a node actor that dies is restarted by Ray (`max_restarts`) with an empty
    Runtime. Its `transient` agents are started again on a live node with their history
    from the session store, which must then be shared by the nodes (`[memory] store =
    "postgres"`; the default SQLite file is shared only by nodes on one machine), and keep
    their keys; subscribers of a run it interrupted get `Error(reason="node_lost")`, a `run()`
    in progress raises `RunFailed("node_lost")`. Its `temporary` agents are gone from the
    registry. The registry actor itself is not restarted: losing it ends the cluster's
    bookkeeping (start a new ClusterRuntime). Subagents a tool spawns (`ToolContext.spawn`,
    `delegate`) run on their parent's node and are in its local registry only. Use as a
    context manager to `stop()` on exit.
    """

    def __init__(
        self,
        ray: Any,
        name: str,
        namespace: str,
        registry: Any,
        nodes: dict[str, Any],
        infos: dict[str, NodeInfo],
        placement: Placement,
        watch_interval: float,
        owns_ray: bool,
    ) -> None:
        self.name = name
        self.namespace = namespace
        self.placement = placement
        self._ray = ray
        self._registry_actor = registry
        self._nodes = nodes
        self._owns_ray = owns_ray
        self._stopped = False
        self._lock = threading.Lock()
        self._subscriptions: weakref.WeakSet[ClusterSubscription] = weakref.WeakSet()
        self.registry = ClusterRegistry(self)
        self.subagents = ClusterSubagents(self)
        self._watcher = NodeWatcher(nodes, registry, placement, watch_interval, infos)

    @classmethod
    def start(
        cls,
        address: str | None = None,
        *,
        nodes: int = 2,
        config: RuntimeConfig | str | os.PathLike[str] | None = None,
        placement: Placement = "session_affinity",
        name: str | None = None,
        namespace: str = "agent_runtime",
        max_restarts: int = 3,
        watch_interval: float = 0.25,
    ) -> ClusterRuntime:
        """Start `nodes` node actors and the cluster registry on a Ray cluster.

        `address`: None (the Ray instance this process already joined, else a new local
        one, shut down by `stop()`), `"auto"` (the running cluster of this machine) or
        `"ray://host:port"` (a remote cluster through Ray Client). `config` is the nodes'
        `RuntimeConfig` (a path or None: `load_config()` here; it must be valid here too).
        Actors are named `<name>.registry` and `<name>.node-<i>` in `namespace`; another
        process that starts a ClusterRuntime of the same name and namespace joins them (and
        leaves with `disconnect()`).
        Node actors take no CPU slot (`num_cpus=0`: they are threads and one event loop each)
        and are restarted up to `max_restarts` times by Ray.

        Raises:
            ClusterUnavailable: Ray is not installed (the message says how to install it).
            ValueError: `nodes < 1`, an unknown placement, `max_restarts < 0` or
                `watch_interval <= 0`.
            ConfigError: an invalid config. TimeoutError: the nodes did not start in time.
        """
        ray = import_ray()
        if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
            raise ValueError(f"invalid nodes {nodes!r} (expected an int >= 1)")
        if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
            raise ValueError(f"invalid max_restarts {max_restarts!r} (expected an int >= 0)")
        if not watch_interval > 0:
            raise ValueError(f"invalid watch_interval {watch_interval!r} (expected seconds > 0)")
        placement = check_placement(placement)
        if not isinstance(config, RuntimeConfig):
            config = load_config(config)
        name = name or f"agent-runtime-{os.getpid()}-{next(_names)}"
        owns_ray = not ray.is_initialized()
        if owns_ray:
            # A local instance of our own gets no dashboard; a cluster's is the cluster's.
            local = {"include_dashboard": False} if address is None else {}
            ray.init(address=address, namespace=namespace, **local)
        registry_name = f"{name}.registry"
        registry = (
            ray.remote(RegistryActor)
            .options(
                name=registry_name,
                namespace=namespace,
                get_if_exists=True,
                num_cpus=0,
                max_concurrency=1,
            )
            .remote()
        )
        node_class = ray.remote(NodeActor)
        handles: dict[str, Any] = {}
        for i in range(nodes):
            node_name = f"{name}.node-{i}"
            handles[node_name] = node_class.options(
                name=node_name,
                namespace=namespace,
                get_if_exists=True,
                num_cpus=0,
                max_restarts=max_restarts,
                max_task_retries=0,
                # Coroutines on the node's loop, not threads: every waiting run() and pull()
                # holds one, so the default of 1000 would queue calls behind long runs.
                max_concurrency=NODE_CONCURRENCY,
            ).remote(node_name, registry_name, namespace, config)
        try:
            answers = get([h.info.remote() for h in handles.values()], START_TIMEOUT)
        except BaseException:
            for handle in [*handles.values(), registry]:
                with contextlib.suppress(Exception):
                    ray.kill(handle, no_restart=True)
            if owns_ray:
                ray.shutdown()
            raise
        infos = {info.name: info for info in answers}
        runtime = cls(
            ray, name, namespace, registry, handles, infos, placement, watch_interval, owns_ray
        )
        log.info("cluster.started", cluster=name, nodes=list(handles), placement=placement)
        return runtime

    # -- agents -------------------------------------------------------------------------------

    def start_agent(
        self,
        key: AgentKey | tuple[str, str, int],
        *,
        node: str | None = None,
        output_type: Any = None,
        on_failure: Callable[[Exception], Any] | None = None,
        **options: Unpack[AgentOptionsDict],
    ) -> ClusterAgent:
        """Start an agent under `key` on the node placement picks (or on `node`), with the
        options of `Runtime.start_agent` (typed as there: `AgentOptionsDict`'s keywords,
        `output_type` and `on_failure`).

        Raises:
            AlreadyRegistered: an agent of the cluster holds the key (`.holder` is its
                ClusterAgent, None while that one is still starting).
            TypeError: an option (a tool: named) cannot be pickled for the node, an unknown
                option or a wrong type; ValueError: an invalid key, value or node name.
            NodeLost: the chosen node was lost during the start.
            AgentStopped: the cluster runtime was stopped.
        """
        agent_key = AgentKey.of(key)
        if self._stopped:
            raise AgentStopped(agent_key)
        if node is not None and node not in self._nodes:
            raise ValueError(f"unknown node {node!r} (expected one of: {', '.join(self._nodes)})")
        restart = options.get("restart", "temporary")
        given: dict[str, Any] = dict(options)
        if output_type is not None:
            given["output_type"] = output_type
        if on_failure is not None:
            given["on_failure"] = on_failure
        packed = pack_options(given)
        reserved = get(
            self._registry_actor.reserve.remote(
                agent_key,
                restart,
                packed if restart == "transient" else None,
                self.placement,
                self._watcher.running(),
                node,
            ),
            CALL_TIMEOUT,
        )
        if not isinstance(reserved, Reserved):
            holder = None if reserved.node is None else ClusterAgent(self, agent_key, reserved.node)
            raise AlreadyRegistered(agent_key, holder)
        try:
            answer = get(
                self._nodes[reserved.node].start_agent.remote(agent_key, packed), CALL_TIMEOUT
            )
        except BaseException as exc:
            self._registry_actor.release.remote(agent_key, reserved.token)
            if node_failure(exc):
                raise NodeLost(agent_key, reserved.node, type(exc).__name__) from None
            raise
        if isinstance(answer, RemoteError):
            self._registry_actor.release.remote(agent_key, reserved.token)
            raise answer.rebuild()
        get(self._registry_actor.confirm.remote(agent_key, reserved.token, answer), CALL_TIMEOUT)
        return ClusterAgent(self, agent_key, reserved.node)

    def _stop_agent(self, key: AgentKey) -> bool:
        entry = self._entry(key)
        if entry is None:
            return False
        try:
            stopped = bool(get(self._nodes[entry.node].stop_agent.remote(key), CALL_TIMEOUT))
        except Exception as exc:
            if not node_failure(exc):
                raise
            stopped = False
        # The node tells the registry too (once the agent's actor exits); this makes the
        # entry go before stop() returns.
        get(self._registry_actor.exited.remote(key, entry.node, entry.incarnation), CALL_TIMEOUT)
        return stopped

    # -- nodes --------------------------------------------------------------------------------

    def nodes(self) -> dict[str, NodeInfo]:
        """The live nodes as they last answered the watcher (name, incarnation, process,
        agents, running runs)."""
        return self._watcher.infos()

    def node_actor(self, name: str) -> Any:
        """The Ray actor handle of node `name` (for `ray.kill` in tests and operations).

        Raises:
            ValueError: no such node.
        """
        if name not in self._nodes:
            raise ValueError(f"unknown node {name!r} (expected one of: {', '.join(self._nodes)})")
        return self._nodes[name]

    # -- what the handles and subscriptions use -------------------------------------------------

    def _node_actor(self, name: str) -> Any:
        return self._nodes[name]

    def _entry(self, key: AgentKey) -> Entry | None:
        entry: Entry | None = get(self._registry_actor.lookup.remote(key), CALL_TIMEOUT)
        return entry

    def _entries(self) -> list[Entry]:
        entries: list[Entry] = get(self._registry_actor.entries.remote(), CALL_TIMEOUT)
        return entries

    def _locate(self, key: AgentKey) -> tuple[Any, str]:
        """(node actor, its incarnation) of the agent under `key`.

        Raises:
            AgentStopped: no live agent holds the key.
        """
        entry = self._entry(key)
        if entry is None or entry.incarnation is None:
            raise AgentStopped(key)
        return self._nodes[entry.node], entry.incarnation

    def _whereabouts(self, key: AgentKey, incarnation: str) -> str:
        """Where an agent is, seen from a subscription whose node `incarnation` was lost:
        `moved` (live on another incarnation), `waiting` (not recovered yet) or `gone`."""
        if self._stopped:
            return "gone"
        entry: Entry | None = get(self._registry_actor.find.remote(key), CALL_TIMEOUT)
        if entry is None:
            return "gone"
        if entry.incarnation is not None and entry.incarnation != incarnation:
            return "moved"
        return "waiting"

    def _opened(self, sub: ClusterSubscription) -> None:
        with self._lock:
            self._subscriptions.add(sub)

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        """True until `stop()`."""
        return not self._stopped

    def disconnect(self) -> None:
        """Leave the cluster running for its other processes: stop this process's watcher
        and close its subscriptions, but no node, agent or registry. Idempotent; the runtime
        is not `alive` after it (use `stop()` in the one process that ends the cluster)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            subscriptions = list(self._subscriptions)
        self._watcher.stop()
        for sub in subscriptions:
            sub.close()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop every node's Runtime (each run gets its `Canceled`), then the node actors and
        the registry; shut Ray down if `start` started it. Idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            subscriptions = list(self._subscriptions)
        self._watcher.stop()
        ray = self._ray
        try:
            with contextlib.suppress(Exception):
                get([n.stop.remote() for n in self._nodes.values()], timeout)
            for sub in subscriptions:
                sub.close()
            for handle in [*self._nodes.values(), self._registry_actor]:
                with contextlib.suppress(Exception):
                    ray.kill(handle, no_restart=True)
        finally:
            if self._owns_ray:
                ray.shutdown()
        log.info("cluster.stopped", cluster=self.name)

    def __enter__(self) -> ClusterRuntime:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<ClusterRuntime {self.name} nodes={len(self._nodes)} alive={self.alive}>"
