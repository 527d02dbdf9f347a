"""What the live view reads of a runtime: `runtime.tree()` and `runtime.stats()`, or, on a
runtime without them, the same fields derived from `agent.state()` and the subscriptions.

The view is written against the field names of `RuntimeTree` / `AgentStatus` /
`RuntimeStats` (issue 14), declared here as protocols; `take(runtime)` returns the
runtime's own snapshot when it has one. The fallback asks each live agent's actor for its
state (one message each, answered promptly also while a run is busy); it knows no restart
counts (0) and no counters (`stats` is None).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent_runtime._errors import AgentStopped
from agent_runtime._key import AgentKey
from agent_runtime.agent import Agent
from agent_runtime.messages import AssistantMessage
from agent_runtime.runtime import Runtime
from supervisors import DynamicSupervisor, Supervisor, supervisor_of


class NodeView(Protocol):
    """A node of the supervision tree (`TreeNode`)."""

    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def strategy(self) -> str | None: ...
    @property
    def restarts(self) -> int: ...
    @property
    def alive(self) -> bool: ...
    @property
    def agent(self) -> AgentKey | None: ...
    @property
    def children(self) -> Sequence[NodeView]: ...


class SubscriptionView(Protocol):
    """One open subscription (`SubscriptionStatus`)."""

    @property
    def depth(self) -> int: ...
    @property
    def dropped(self) -> int: ...


class AgentView(Protocol):
    """One agent (`AgentStatus`)."""

    @property
    def key(self) -> AgentKey: ...
    @property
    def status(self) -> str: ...
    @property
    def activity(self) -> str: ...
    @property
    def run_id(self) -> str | None: ...
    @property
    def turn(self) -> int: ...
    @property
    def pending_tool_calls(self) -> int: ...
    @property
    def steering_queue(self) -> int: ...
    @property
    def follow_up_queue(self) -> int: ...
    @property
    def subscriptions(self) -> Sequence[SubscriptionView]: ...
    @property
    def parent(self) -> AgentKey | None: ...


class TreeView(Protocol):
    """A runtime's snapshot (`RuntimeTree`)."""

    @property
    def root(self) -> NodeView: ...
    @property
    def agents(self) -> Sequence[AgentView]: ...


class StatsView(Protocol):
    """A runtime's counters (`RuntimeStats`)."""

    @property
    def runs(self) -> Mapping[str, int]: ...
    @property
    def turns(self) -> int: ...
    @property
    def tool_calls(self) -> Mapping[str, int]: ...
    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def retries(self) -> int: ...
    @property
    def restarts(self) -> int: ...
    @property
    def dropped_events(self) -> int: ...


def take(runtime: Runtime) -> tuple[TreeView, StatsView | None]:
    """The runtime's tree and counters now (the counters None when it has none)."""
    tree = getattr(runtime, "tree", None)
    stats = getattr(runtime, "stats", None)
    if callable(tree) and callable(stats):
        return tree(), stats()
    return _derived_tree(runtime), None


# -- the fallback ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Node:
    id: str
    kind: str
    alive: bool
    strategy: str | None = None
    restarts: int = 0
    agent: AgentKey | None = None
    children: list[_Node] = field(default_factory=list)


@dataclass(frozen=True)
class _Subscription:
    depth: int
    dropped: int


@dataclass(frozen=True)
class _Agent:
    key: AgentKey
    status: str
    activity: str
    run_id: str | None = None
    turn: int = 0
    pending_tool_calls: int = 0
    steering_queue: int = 0
    follow_up_queue: int = 0
    subscriptions: list[_Subscription] = field(default_factory=list)
    parent: AgentKey | None = None


@dataclass(frozen=True)
class _Tree:
    root: _Node
    agents: list[_Agent]


def _derived_tree(runtime: Runtime) -> _Tree:
    agents = [a for _, a in runtime.registry.list() if isinstance(a, Agent)]
    statuses = [_agent_status(a) for a in agents]
    running = {s.key for s in statuses if s.status == "running"}
    # A parent whose tool call waits while a subagent it spawned runs is waiting on it.
    waiting = {s.parent for s in statuses if s.parent is not None and s.key in running}
    statuses = [
        _replace_activity(s, "waiting on subagent")
        if s.key in waiting and s.activity.startswith("tool:")
        else s
        for s in statuses
    ]
    by_child_id = {f"agent:{a.key.session}/{a.key.role}/{a.key.index}": a.key for a in agents}
    root = _Node(
        id=runtime.name,
        kind="supervisor",
        strategy="one_for_one",
        alive=runtime.supervisor.alive,
        children=_nodes(runtime.supervisor, by_child_id, None),
    )
    return _Tree(root=root, agents=statuses)


def _nodes(
    sup: Supervisor | DynamicSupervisor, by_child_id: dict[str, AgentKey], owner: AgentKey | None
) -> list[_Node]:
    nodes = []
    for info in sup.which_children():
        key = by_child_id.get(info.id, owner)
        nested = supervisor_of(info.ref) if info.ref is not None else None
        children = _nodes(nested, by_child_id, key) if nested is not None and nested.alive else []
        kind = "supervisor" if info.type == "supervisor" else "worker"
        nodes.append(
            _Node(
                id=info.id,
                kind=kind,
                alive=info.alive,
                strategy="one_for_one" if kind == "supervisor" else None,
                agent=key if kind == "worker" else None,
                children=children,
            )
        )
    return nodes


def _agent_status(agent: Agent) -> _Agent:
    shell: Any = agent._shell
    parent = shell.parent.key if shell.parent is not None else None
    subscriptions = [
        _Subscription(depth=s.stream.stats().queue_size, dropped=s.stream.stats().dropped)
        for s in (ref() for ref in shell.subscriptions)
        if s is not None
    ]
    if not agent.alive:  # stopped, or a transient agent between incarnations
        return _Agent(agent.key, "stopped", "stopped", parent=parent)
    try:
        state = agent.state()
    except (AgentStopped, TimeoutError):
        return _Agent(agent.key, "stopped", "stopped", parent=parent)
    status = "running" if state.is_running else "idle"
    pending = list(state.pending_tool_calls)
    if not state.is_running:
        activity = "idle"
    elif pending:
        names = _tool_names(state.messages, pending)
        activity = "tool:" + ",".join(dict.fromkeys(names))
    elif state.stream_message is not None:
        activity = "streaming"
    else:
        activity = "running"
    return _Agent(
        key=agent.key,
        status=status,
        activity=activity,
        run_id=state.run_id,
        pending_tool_calls=len(pending),
        steering_queue=len(state.steering_queue),
        follow_up_queue=len(state.follow_up_queue),
        subscriptions=subscriptions,
        parent=parent,
    )


def _tool_names(messages: Sequence[Any], ids: list[str]) -> list[str]:
    wanted = set(ids)
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            return [c.name for c in message.tool_calls if c.id in wanted] or ["?"]
    return ["?"]


def _replace_activity(status: _Agent, activity: str) -> _Agent:
    return _Agent(
        key=status.key,
        status=status.status,
        activity=activity,
        run_id=status.run_id,
        turn=status.turn,
        pending_tool_calls=status.pending_tool_calls,
        steering_queue=status.steering_queue,
        follow_up_queue=status.follow_up_queue,
        subscriptions=status.subscriptions,
        parent=status.parent,
    )
