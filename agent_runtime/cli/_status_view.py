"""A runtime's tree and stats for people: a rich renderable for terminals, plain lines else.

Both take a `StatusReport` (what `Runtime.tree()` and `stats()` return, or what the status
socket serves), so a live view of this process and one of another process look the same.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from agent_runtime._key import AgentKey
from agent_runtime.runtime import AgentStatus, RuntimeStats, StatusReport, TreeNode

STATUS_STYLE = {"running": "bold green", "idle": "cyan", "stopped": "red"}


def key_text(key: AgentKey) -> str:
    """`session/role/index`."""
    return f"{key.session}/{key.role}/{key.index}"


def render_status(report: StatusReport) -> RenderableType:
    """The report as a rich renderable: header, supervision tree, agents table (`queued`:
    steering + follow-up messages waiting; `subs`: each subscription's depth / bound),
    counters."""
    tree, stats = report.tree, report.stats
    agents = {a.key: a for a in tree.agents}
    root = Tree(_node_label(tree.root, agents))
    _add_nodes(root, tree.root.children, agents)
    return Group(
        Text.from_markup(f"[bold]{escape(_header(report))}[/]"),
        root,
        _agents_table(tree.agents),
        Text(_stats_text(stats), style="dim"),
    )


def status_lines(report: StatusReport) -> list[str]:
    """The report as plain lines (for logs and pipes): header, counters, tree, agents."""
    tree = report.tree
    agents = {a.key: a for a in tree.agents}
    lines = [_header(report), f"stats  {_stats_text(report.stats)}", "tree"]
    _tree_lines(tree.root, agents, 1, lines)
    lines.append("agents" if tree.agents else "agents  none")
    lines += [f"  {_agent_line(a)}" for a in tree.agents]
    return lines


def _header(report: StatusReport) -> str:
    agents = report.tree.agents
    running = sum(1 for a in agents if a.status == "running")
    return (
        f"runtime {report.tree.runtime}  up {report.stats.uptime:.1f}s  "
        f"agents {len(agents)}  running {running}"
    )


def _stats_text(stats: RuntimeStats) -> str:
    runs = " ".join(f"{k}={v}" for k, v in stats.runs.items())
    tools = " ".join(f"{k}={v}" for k, v in stats.tool_calls.items() if v or k in ("ok", "error"))
    return (
        f"runs {runs}  turns={stats.turns}  tool_calls {tools}  "
        f"tokens in={stats.input_tokens} out={stats.output_tokens}  retries={stats.retries}  "
        f"restarts={stats.restarts}  dropped={stats.dropped_events}  "
        f"loop_waits={stats.loop_waits} ({stats.loop_wait_seconds:.3f}s)"
    )


def _node_text(node: TreeNode) -> str:
    kind = node.kind if node.strategy is None else f"{node.kind} {node.strategy}"
    text = f"{node.id} ({kind}) {'alive' if node.alive else 'down'}"
    return text + (f" restarts={node.restarts}" if node.restarts else "")


def _node_label(node: TreeNode, agents: dict[AgentKey, AgentStatus]) -> str:
    status = agents.get(node.agent) if node.agent is not None else None
    label = escape(_node_text(node))
    if not node.alive:
        label = f"[red]{label}[/]"
    if status is not None:
        style = STATUS_STYLE.get(status.status, "white")
        label += f"  [{style}]{status.status}[/] {escape(status.activity)}"
    return label


def _add_nodes(branch: Tree, nodes: list[TreeNode], agents: dict[AgentKey, AgentStatus]) -> None:
    for node in nodes:
        _add_nodes(branch.add(_node_label(node, agents)), node.children, agents)


def _tree_lines(
    node: TreeNode, agents: dict[AgentKey, AgentStatus], depth: int, lines: list[str]
) -> None:
    line = "  " * depth + _node_text(node)
    status = agents.get(node.agent) if node.agent is not None else None
    if status is not None:
        line += f"  {status.status} {status.activity}"
    lines.append(line)
    for child in node.children:
        _tree_lines(child, agents, depth + 1, lines)


def _agent_line(agent: AgentStatus) -> str:
    subs = ",".join(f"{s.depth}/{s.max_queue}" for s in agent.subscriptions) or "-"
    dropped = sum(s.dropped for s in agent.subscriptions)
    parent = key_text(agent.parent) if agent.parent is not None else "-"
    line = (
        f"{key_text(agent.key)}  {agent.status}  {agent.activity}  turn={agent.turn}  "
        f"tools={agent.pending_tool_calls}  steering={agent.steering_queue}  "
        f"follow_up={agent.follow_up_queue}  subs={subs} dropped={dropped}  parent={parent}"
    )
    return line + (f"  error={agent.error}" if agent.error else "")


def _agents_table(agents: list[AgentStatus]) -> Table:
    table = Table(expand=False, box=None, header_style="bold", pad_edge=False)
    for column in (
        "agent",
        "status",
        "activity",
        "turn",
        "tools",
        "steer+follow",
        "subs",
        "parent",
    ):
        table.add_column(column)
    for agent in agents:
        subs = ", ".join(f"{s.depth}/{s.max_queue}" for s in agent.subscriptions) or "-"
        dropped = sum(s.dropped for s in agent.subscriptions)
        if dropped:
            subs += f" [red]({dropped} dropped)[/]"
        style = STATUS_STYLE.get(agent.status, "white")
        table.add_row(
            escape(key_text(agent.key)),
            f"[{style}]{agent.status}[/]",
            escape(agent.activity) + (f" [red]{escape(agent.error)}[/]" if agent.error else ""),
            str(agent.turn),
            str(agent.pending_tool_calls),
            f"{agent.steering_queue}+{agent.follow_up_queue}",
            subs,
            escape(key_text(agent.parent)) if agent.parent is not None else "-",
        )
    return table
