"""`Runtime.tree()` and `Runtime.stats()`: what a runtime is doing, read without waiting on it.

The tree is built from what each part publishes where it changes, never from a call into an
actor: the refs of the root's children (recorded by their start functions), the registry of
agents, and each agent's immutable status snapshots (`agent._status`), swapped whole by its
actor and its run driver. So a snapshot is taken in microseconds per agent however busy the
agents are, and may be a few milliseconds behind them (a fact on its way to an actor is not
in it yet). The counters are the runtime's `RuntimeCounters`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

import pykka
from pydantic import BaseModel, ConfigDict, Field, WrapValidator

from agent_runtime._counters import RuntimeCounters
from agent_runtime._key import AgentKey, validated_key
from agent_runtime.agent import Agent
from agent_runtime.agent._cell import AgentCell
from agent_runtime.agent._status import activity
from agent_runtime.registry import AgentRegistry
from supervisors import ChildSpec

_Key = Annotated[AgentKey, WrapValidator(validated_key)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TreeNode(_Frozen):
    """One node of the supervision tree: a supervisor with its children, or a worker.

    `restarts` counts how often this node was restarted by its supervisor since the runtime
    started; `agent` is the key of the agent a worker is (None for the runtime's own parts).
    """

    id: str
    kind: Literal["supervisor", "worker"]
    strategy: Literal["one_for_one", "one_for_all", "rest_for_one"] | None = None
    restarts: int = 0
    alive: bool
    agent: _Key | None = None
    children: list[TreeNode] = Field(default_factory=list)


class SubscriptionStatus(_Frozen):
    """One open subscription to an agent: events buffered now (`depth`) and dropped so far."""

    depth: int
    dropped: int
    max_queue: int
    overflow: str


class AgentStatus(_Frozen):
    """One agent as it was a moment ago.

    `status`: `running` while a run is in progress, `stopped` once the agent ended (or while
    its actor is down), else `idle`. `turn` is the number of turns the running run started
    (0 when idle); `pending_tool_calls`, `steering_queue` and `follow_up_queue` are counts;
    `parent` is the key of the agent that spawned this one (delegation), or None.
    `activity` is for people: `idle`, `starting`, `waiting for model`, `streaming`,
    `retrying`, `tool:<name>` (several: `tool:a,b`), `waiting on subagent`, `running`,
    `ending` or `stopped`. `error` says why the last run failed, until the next one starts.
    """

    key: _Key
    status: Literal["idle", "running", "stopped"]
    activity: str
    run_id: str | None = None
    turn: int = 0
    pending_tool_calls: int = 0
    steering_queue: int = 0
    follow_up_queue: int = 0
    subscriptions: list[SubscriptionStatus] = Field(default_factory=list)
    parent: _Key | None = None
    error: str | None = None


class RuntimeTree(_Frozen):
    """A snapshot of a runtime: its supervision tree (`root`) and every live agent's status,
    sorted by key. JSON via `model_dump_json()`, and back via `model_validate_json()`.

    Taken without waiting for any actor, so it may be a few milliseconds behind the agents;
    two parts of one snapshot may differ by as much (an agent's status and its tree node).
    """

    runtime: str
    taken_at: float  # time.time() when the snapshot was taken
    root: TreeNode
    agents: list[AgentStatus] = Field(default_factory=list)

    def agent(self, key: AgentKey | tuple[str, str, int]) -> AgentStatus | None:
        """The status of the agent `key`, or None if it was not live."""
        wanted = AgentKey.of(key)
        return next((a for a in self.agents if a.key == wanted), None)


class RuntimeStats(_Frozen):
    """A runtime's counters since it started.

    `runs` by outcome (`completed`, `failed`, `canceled`), `tool_calls` by outcome (`ok`, or
    the error's `details["outcome"]`: `error`, `timeout`, `invalid_arguments`, `not_found`,
    `skipped`, `not_started`, `unknown`); every key is present. `retries` counts provider
    retries scheduled, `restarts` restarts of agents and of the root's children,
    `dropped_events` the events subscriptions dropped on overflow, and `loop_waits` how often
    a run waited for its turn of the event loop (its start or a model call, when other runs'
    steps had taken the iteration's millisecond: a loop that is the bottleneck), those waits
    adding up to `loop_wait_seconds`. Read without locks shared with the agents: a few
    milliseconds behind them at most.
    """

    runtime: str
    uptime: float  # seconds since the runtime started
    runs: dict[str, int]
    turns: int
    tool_calls: dict[str, int]
    input_tokens: int
    output_tokens: int
    retries: int
    restarts: int
    dropped_events: int
    # Defaults: a report of a runtime from before these counters still reads.
    loop_waits: int = 0
    loop_wait_seconds: float = 0.0


class StatusReport(_Frozen):
    """What the status socket serves: a runtime's tree and stats, taken together."""

    tree: RuntimeTree
    stats: RuntimeStats


class _RootChild:
    """What the tree knows of one child of the root: the ref its start function last
    returned, and how often that function ran (written on the root supervisor's thread)."""

    __slots__ = ("kind", "ref", "starts")

    def __init__(self, kind: Literal["supervisor", "worker"]) -> None:
        self.kind = kind
        self.ref: pykka.ActorRef[Any] | None = None
        self.starts = 0


class Introspection:
    """Builds a runtime's `RuntimeTree` and `RuntimeStats` (see the module docstring)."""

    def __init__(
        self,
        name: str,
        registry: AgentRegistry[Any],
        counters: RuntimeCounters,
        root_alive: Callable[[], bool],
    ) -> None:
        self._name = name
        self._registry = registry
        self._counters = counters
        self._root_alive = root_alive
        self._children: dict[str, _RootChild] = {}
        self._agents_under: str | None = None
        self._started = time.monotonic()

    def watched(self, specs: Sequence[ChildSpec], *, agents_under: str) -> list[ChildSpec]:
        """The root's child specs with start functions that record each start: every start
        after a child's first is one of its restarts. The agents show under `agents_under`."""
        self._agents_under = agents_under
        self._children = {spec.id: _RootChild(spec.type) for spec in specs}
        return [
            spec.model_copy(update={"start": self._recording(spec.id, spec.start)})
            for spec in specs
        ]

    def _recording(
        self, child_id: str, start: Callable[[], pykka.ActorRef[Any]]
    ) -> Callable[[], pykka.ActorRef[Any]]:
        record = self._children[child_id]

        def recorded() -> pykka.ActorRef[Any]:
            record.starts += 1
            if record.starts > 1:
                self._counters.restarted()
            record.ref = start()
            return record.ref

        return recorded

    # -- the tree -------------------------------------------------------------------------------

    def tree(self) -> RuntimeTree:
        """A snapshot of the tree and of every live agent (see `RuntimeTree`)."""
        shells = self._shells()
        agents = _statuses(shells)
        children = []
        for child_id, record in self._children.items():
            ref = record.ref
            children.append(
                TreeNode(
                    id=child_id,
                    kind=record.kind,
                    strategy="one_for_one" if record.kind == "supervisor" else None,
                    restarts=max(record.starts - 1, 0),
                    alive=ref is not None and ref.is_alive(),
                    children=[_agent_node(s) for s in shells]
                    if child_id == self._agents_under
                    else [],
                )
            )
        root = TreeNode(
            id=self._name,
            kind="supervisor",
            strategy="one_for_one",
            alive=self._root_alive(),
            children=children,
        )
        return RuntimeTree(runtime=self._name, taken_at=time.time(), root=root, agents=agents)

    def pending_approvals(self) -> list[Any]:
        """The `PendingApproval`s every live agent published, oldest request first."""
        found = [p for cell in self._shells() for p in cell.pending_approvals]
        return sorted(found, key=lambda p: p.requested_at)

    def _shells(self) -> list[AgentCell]:
        return [agent._cell for _, agent in self._registry.list() if isinstance(agent, Agent)]

    # -- the counters ---------------------------------------------------------------------------

    def stats(self) -> RuntimeStats:
        """The counters since start (see `RuntimeStats`)."""
        values = self._counters.read()  # first: a subscription ending now is never counted twice
        live_dropped = sum(s.dropped for shell in self._shells() for s in _subscriptions(shell))
        return RuntimeStats(
            runtime=self._name,
            uptime=time.monotonic() - self._started,
            runs=values.runs,
            turns=values.turns,
            tool_calls=values.tool_calls,
            input_tokens=values.input_tokens,
            output_tokens=values.output_tokens,
            retries=values.retries,
            restarts=values.restarts,
            dropped_events=values.dropped_events + live_dropped,
            loop_waits=values.loop_waits,
            loop_wait_seconds=values.loop_wait_seconds,
        )

    def report(self) -> StatusReport:
        return StatusReport(tree=self.tree(), stats=self.stats())


def _statuses(shells: list[AgentCell]) -> list[AgentStatus]:
    running: set[AgentKey] = set()
    for shell in shells:
        status = shell.status
        if status is not None and status.run_id is not None and not _down(shell):
            running.add(shell.key)
    delegating = {s.parent.key for s in shells if s.parent is not None and s.key in running}
    return [_status(shell, shell.key in running, shell.key in delegating) for shell in shells]


def _status(shell: AgentCell, running: bool, delegating: bool) -> AgentStatus:
    status, progress = shell.status, shell.progress  # each read once: a consistent snapshot
    stopped = _down(shell)
    run_id = status.run_id if running and status is not None else None
    if progress is not None and (run_id is None or progress.run_id != run_id):
        progress = None  # of a run that ended, or the driver has not published this one yet
    return AgentStatus(
        key=shell.key,
        status="stopped" if stopped else "running" if running else "idle",
        activity=activity(stopped, status, progress, delegating),
        run_id=run_id,
        turn=progress.turn if progress is not None else 0,
        pending_tool_calls=len(progress.tools) if progress is not None else 0,
        steering_queue=status.steering if status is not None else 0,
        follow_up_queue=status.follow_ups if status is not None else 0,
        subscriptions=_subscriptions(shell),
        parent=shell.parent.key if shell.parent is not None else None,
        error=status.error if status is not None else None,
    )


def _down(shell: AgentCell) -> bool:
    ref = shell.ref
    return shell.stopped or ref is None or not ref.is_alive()


def _subscriptions(shell: AgentCell) -> list[SubscriptionStatus]:
    found = []
    for ref in shell.subscriptions:
        sub = ref()
        if sub is None or sub.closed:
            continue
        stats = sub.stream.stats()  # the stream's own lock, held only for the copy
        found.append(
            SubscriptionStatus(
                depth=stats.queue_size,
                dropped=stats.dropped,
                max_queue=stats.max_queue,
                overflow=sub.overflow,
            )
        )
    return found


def _agent_node(shell: AgentCell) -> TreeNode:
    """An agent in the subagents supervisor: a worker, or (`transient`) the one-child
    supervisor that gives it a restart budget of its own."""
    key = shell.key
    child_id = f"agent:{key.session}/{key.role}/{key.index}"  # as runtime.subagents names it
    actor = TreeNode(
        id=child_id,
        kind="worker",
        restarts=max(shell.incarnations - 1, 0),
        alive=not _down(shell),
        agent=key,
    )
    if shell.options.restart != "transient":
        return actor
    holder = shell.child_ref
    return TreeNode(
        id=child_id,
        kind="supervisor",
        strategy="one_for_one",
        alive=holder is not None and holder.is_alive(),
        children=[actor.model_copy(update={"id": "agent"})],
    )
