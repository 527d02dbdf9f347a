"""The demo's live terminal view: the supervision tree with each agent's status and activity,
a scrolling event log, and the closing summary table; plain lines when not on a terminal.

`Presenter.run(work)` runs `work` on a thread and shows it meanwhile: on a terminal a rich
`Live` view redrawn up to 8 times a second from `runtime.tree()`, `runtime.stats()` and the
journal; otherwise each journal line printed once, as it comes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.rule import Rule
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from agent_runtime._key import AgentKey
from agent_runtime.cli._demo_scenario import Outcome
from agent_runtime.cli._journal import Journal, Line, Tally, who
from agent_runtime.runtime import AgentStatus, RuntimeStats, RuntimeTree, TreeNode

T = TypeVar("T")
Snapshot = Callable[[], tuple[RuntimeTree, RuntimeStats]]

FRAME = 1 / 8  # seconds between redraws of the live view
STATUS_STYLE = {"running": "bold green", "idle": "cyan", "stopped": "red"}


# -- the tree -------------------------------------------------------------------------------------


def activity_text(agent: AgentStatus, agents: Sequence[AgentStatus]) -> str:
    """What `agent` does, for people: `streaming`, `in tool X`, `waiting on critic/0`..."""
    activity = agent.activity
    if activity.startswith("tool:"):
        return "in tool " + activity.removeprefix("tool:")
    if activity == "waiting on subagent":
        running = [who(a.key) for a in agents if a.parent == agent.key and a.status == "running"]
        return "waiting on " + ", ".join(running) if running else activity
    return activity


def render_tree(tree: RuntimeTree, journal: Journal | None = None) -> Tree:
    """The supervision tree as a rich Tree: agents with status, activity, turn, queues and
    the agent that delegated to them; the streaming ones with their last words. A label
    too long for the screen is cut short (one line per node)."""
    agents = {a.key: a for a in tree.agents}

    def label(node: TreeNode) -> Text:
        agent = agents.get(node.agent) if node.agent is not None else None
        text = Text.from_markup(_node_label(node, agent, tree.agents, journal), overflow="ellipsis")
        text.no_wrap = True
        return text

    def add(branch: Tree, nodes: Sequence[TreeNode]) -> None:
        for node in nodes:
            add(branch.add(label(node)), node.children)

    root = Tree(label(tree.root))
    add(root, tree.root.children)
    return root


def _node_label(
    node: TreeNode,
    agent: AgentStatus | None,
    every: Sequence[AgentStatus],
    journal: Journal | None,
) -> str:
    restarts = f" [yellow]↻ {node.restarts}[/]" if node.restarts else ""
    down = "" if node.alive else " [red]down[/]"
    if agent is None:
        kind = f" [dim]({node.kind}{' ' + node.strategy if node.strategy else ''})[/]"
        name = f"[bold]{escape(node.id)}[/]" if node.kind == "supervisor" else escape(node.id)
        return f"{name}{kind}{restarts}{down}"
    style = STATUS_STYLE.get(agent.status, "white")
    label = f"[bold]{escape(who(agent.key))}[/] [{style}]{agent.status}[/]"
    if agent.activity != agent.status:
        label += f" {escape(activity_text(agent, every))}"
    facts = []
    if agent.turn:
        facts.append(f"turn {agent.turn}")
    if agent.steering_queue or agent.follow_up_queue:
        facts.append(f"queued {agent.steering_queue}+{agent.follow_up_queue}")
    dropped = sum(s.dropped for s in agent.subscriptions)
    if dropped:
        facts.append(f"[red]{dropped} dropped[/]")
    if agent.parent is not None:
        facts.append(f"for {escape(who(agent.parent))}")
    if facts:
        label += " [dim]· " + " · ".join(facts) + "[/]"
    if journal is not None and agent.activity == "streaming":
        words = " ".join(journal.preview(agent.key).split())[-48:]
        if words:
            label += f' [italic dim]"…{escape(words)}"[/]'
    return label + restarts + down


def _count_nodes(node: TreeNode) -> int:
    return 1 + sum(_count_nodes(c) for c in node.children)


# -- the event log and counters -------------------------------------------------------------------


def line_text(line: Line) -> Text:
    """One event-log line: time, who, what."""
    text = Text(f"{line.at:6.2f}s ", style="dim", no_wrap=True, overflow="ellipsis")
    text.append(f"{line.who:<14} ", style="bold" if line.who != "operator" else "bold yellow")
    text.append(line.text, style=line.style)
    return text


def plain_line(line: Line) -> str:
    """One event-log line without styles (for pipes and logs)."""
    return f"{line.at:6.2f}s  {line.who:<14} {line.text}"


def stats_text(stats: RuntimeStats) -> str:
    """The runtime's counters in one line."""
    runs = " ".join(f"{k} {v}" for k, v in stats.runs.items() if v) or "none"
    tools = sum(stats.tool_calls.values())
    return (
        f"runs: {runs} · turns {stats.turns} · tool calls {tools} · tokens "
        f"{stats.input_tokens} in / {stats.output_tokens} out · retries {stats.retries} · "
        f"restarts {stats.restarts} · dropped events {stats.dropped_events} · loop waits "
        f"{stats.loop_waits} ({stats.loop_wait_seconds:.3f}s)"
    )


# -- the summary ----------------------------------------------------------------------------------


def summary_table(
    tallies: dict[AgentKey, Tally], wall_time: float, *, plain: bool = False
) -> Table:
    """One row per agent (runs, of them failed and canceled, turns, tool calls, tokens in and
    out, provider retries, seconds in runs) and a total row; the caption is the wall time."""
    table = Table(
        title="summary",
        caption=f"wall time {wall_time:.1f} s",
        box=None if plain else box.SIMPLE_HEAD,
        header_style="" if plain else "bold",
        show_footer=True,
        padding=(0, 1, 0, 0),
    )
    total = Tally()
    for tally in tallies.values():
        total.turns += tally.turns
        total.tool_calls += tally.tool_calls
        total.input_tokens += tally.input_tokens
        total.output_tokens += tally.output_tokens
        total.retries += tally.retries
        total.runs += tally.runs
    columns = ["agent", "runs", "failed", "canceled", "turns", "tools", "tokens in/out"]
    columns += ["retries", "busy"]
    footers = [f"{len(tallies)} agent{'' if len(tallies) == 1 else 's'}", *_cells(total)]
    for name, footer in zip(columns, footers, strict=True):
        table.add_column(name, footer=footer, justify="left" if name == "agent" else "right")
    for key, tally in tallies.items():
        table.add_row(who(key), *_cells(tally))
    return table


def _cells(tally: Tally) -> list[str]:
    outcomes = [run.outcome for run in tally.runs]
    return [
        str(len(outcomes)),
        str(outcomes.count("failed")),
        str(outcomes.count("canceled")),
        str(tally.turns),
        str(tally.tool_calls),
        f"{tally.input_tokens}/{tally.output_tokens}",
        str(tally.retries),
        f"{tally.busy:.1f}s",
    ]


# -- presenting -----------------------------------------------------------------------------------


class Presenter:
    """Shows a running demo on `console`: live on a terminal, plain lines otherwise."""

    def __init__(self, console: Console, journal: Journal, snapshot: Snapshot, title: str) -> None:
        self.console = console
        self.journal = journal
        self.snapshot = snapshot
        self.title = title
        self.live = console.is_terminal
        self.step = ""
        self._started = time.monotonic()

    def render(self) -> RenderableType:
        """One frame: header, tree, the newest log lines that fit, the counters."""
        tree, stats = self.snapshot()
        height = self.console.size.height
        room = max(height - _count_nodes(tree.root) - 6, 3)
        parts: list[RenderableType] = [
            Text.from_markup(f"[bold]{escape(self.step)}[/]" if self.step else ""),
            render_tree(tree, self.journal),
            Rule("events", style="dim"),
            *[line_text(line) for line in self.journal.lines(last=room)],
        ]
        parts.append(Text(stats_text(stats), style="dim", no_wrap=True, overflow="ellipsis"))
        elapsed = time.monotonic() - self._started
        return Panel(
            Group(*parts),
            title=f"[bold]{escape(self.title)}[/]",
            subtitle=f"{elapsed:.1f} s",
            border_style="blue",
        )

    def run(self, work: Callable[[], T]) -> T:
        """Run `work()` on a thread, show it until it returns, and return what it returned.

        Raises:
            BaseException: whatever `work` raised.
        """
        outcome: list[T] = []
        failure: list[BaseException] = []

        def target() -> None:
            try:
                outcome.append(work())
            except BaseException as exc:  # re-raised on the caller's thread
                failure.append(exc)

        thread = threading.Thread(target=target, name="demo-operator", daemon=True)
        thread.start()
        if self.live:
            self._show_live(thread)
        else:
            self._show_plain(thread)
        if failure:
            raise failure[0]
        return outcome[0]

    def _show_live(self, thread: threading.Thread) -> None:
        with Live(
            self.render(),
            console=self.console,
            auto_refresh=False,
            transient=False,
            vertical_overflow="crop",
        ) as live:
            while thread.is_alive():
                thread.join(FRAME)  # the frame period, not a synchronisation
                live.update(self.render(), refresh=True)

    def _show_plain(self, thread: threading.Thread) -> None:
        self.console.print(self.title, markup=False, highlight=False)
        seen = 0
        while True:
            alive = thread.is_alive()
            for line in self.journal.lines(after=seen):
                self.console.print(plain_line(line), markup=False, highlight=False, soft_wrap=True)
                seen = line.seq
            if not alive:
                return
            self.journal.wait_lines(seen, 0.2)


def print_report(
    console: Console,
    live: bool,
    journal: Journal,
    outcome: Outcome,
    final_tree: RuntimeTree,
    final_stats: RuntimeStats,
    wall: float,
    passed: bool,
) -> None:
    """The end of the demo: (plain: the final tree,) the summary table, the runtime's
    counters, each promise held or not, the orchestrator's answer, the verdict."""
    plain = not live
    if plain:
        console.print("supervision tree at the end:", highlight=False)
        console.print(render_tree(final_tree), highlight=False)
    console.print(summary_table(journal.tallies(), wall, plain=plain))
    console.print(f"runtime.stats(): {stats_text(final_stats)}", markup=False, highlight=False)
    marks = {True: "[green]✔[/]", False: "[red]✘[/]", None: "[yellow]-[/]"}
    lines = [
        f"{marks[c.held]} {escape(c.name)}" + (f" [dim]({escape(c.detail)})[/]" if c.detail else "")
        for c in outcome.checks
    ]
    for line in lines:
        console.print(line, highlight=False, soft_wrap=plain)
    if outcome.answer:
        if plain:
            console.print(
                f"answer: {outcome.answer}", markup=False, highlight=False, soft_wrap=True
            )
        else:
            console.print(
                Panel(
                    escape(outcome.answer), title="the orchestrator's answer", border_style="green"
                )
            )
    console.print("[bold green]demo finished[/]" if passed else "[bold red]demo checks failed[/]")
