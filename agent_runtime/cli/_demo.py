"""`agent-runtime demo`: an orchestrator and three subagents of one session, shown live.

Offline by default: every model is scripted (`_demo_script`), with the latencies of a
hosted model, and the whole story takes about 15 s. `profile=` runs the same story on the
model of a config profile (e.g. `local`). What it shows is real: actors under the
runtime's supervision tree, delegation (two subagents at once), steering, abort and
continue, crash isolation, and a `transient` agent restarted with its history from
session memory. The view is `_live.Presenter`; the story and its checks `_demo_scenario`.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import threading
import time
from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from agent_runtime import telemetry
from agent_runtime._errors import ConfigError
from agent_runtime.agent import Agent, delegate
from agent_runtime.cli._demo_scenario import Check, Operator, Outcome
from agent_runtime.cli._demo_script import (
    ORCHESTRATOR_PROMPT,
    SUBAGENT_PROMPT,
    Pace,
    offline_models,
)
from agent_runtime.cli._journal import Journal, follow
from agent_runtime.cli._live import Presenter, render_tree, summary_table
from agent_runtime.cli._snapshot import TreeView, take
from agent_runtime.config import MemoryConfig, RuntimeConfig, load_config
from agent_runtime.llm.base import ChatModel
from agent_runtime.llm.factory import from_config
from agent_runtime.loop import RetryPolicy
from agent_runtime.runtime import Runtime
from agent_runtime.tools import Tool, ToolContext, tool

ORCHESTRATOR = ("demo", "orchestrator", 0)

NOTES = {
    "restart": "one_for_one restarts only the failed child; transient: only after a crash",
    "intensity": "more than 3 restarts in 5 s and the supervisor gives up (no crash loops)",
    "isolation": "a temporary subagent's crash is not restarted and touches no sibling",
    "memory": "each committed turn is in session memory; a restarted agent reads it back",
}


def notes_tool(latency: float) -> Tool:
    """`search_notes`: the team's notes on supervision, after `latency` seconds (an abort
    ends the wait at once)."""

    @tool(parallel_safe=True)
    def search_notes(query: str, *, ctx: ToolContext) -> str:
        """Search the team's notes on supervising agents; returns the matching notes."""
        ctx.signal.wait(latency)
        return "\n".join(f"- {topic}: {note}" for topic, note in NOTES.items())

    return search_notes


def demo_config(base: RuntimeConfig) -> RuntimeConfig:
    """`base` with an in-memory session store (each demo starts from a clean slate) and
    warnings-only logs (they go to the view's event log, not over the screen)."""
    return base.model_copy(
        update={
            "memory": MemoryConfig(store="memory"),
            "telemetry": base.telemetry.model_copy(
                update={"log_level": "warning", "log_format": "json"}
            ),
        }
    )


def demo_command(args: argparse.Namespace) -> int:
    """`agent-runtime demo [--model PROFILE] [--pace FACTOR]`; a config problem is reported
    on stderr with exit code 2."""
    try:
        return run_demo(Console(), profile=args.model, config=args.config, pace=args.pace)
    except ConfigError as exc:
        print(f"agent-runtime demo: {exc}", file=sys.stderr)
        return 2


def run_demo(
    console: Console | None = None,
    *,
    profile: str | None = None,
    config: str | None = None,
    pace: float = 1.0,
) -> int:
    """Run the showcase; returns a process exit code: 0 when every promise it shows held
    (with a real model, a step the model gave no occasion for is skipped, not failed).

    Raises:
        ConfigError: the config file is invalid, or `profile` names no usable profile.
        ValueError: `pace` is not positive.
    """
    if not pace > 0:
        raise ValueError(f"pace must be > 0, not {pace!r}")
    console = console or Console()
    cfg = demo_config(load_config(config))
    scripted = profile is None
    if scripted:
        orchestrator_model, subagent_model = offline_models(Pace(pace))
        title = "agent-runtime demo · offline (scripted models)"
    else:
        orchestrator_model = from_config(profile, config=cfg)
        subagent_model = from_config(profile, config=cfg)
        title = f"agent-runtime demo · model profile {profile!r}"
    journal = Journal()
    telemetry.configure_logging(cfg.telemetry, stream=_LogSink(journal))
    started = time.monotonic()
    with Runtime.start(cfg, name="demo", configure_logging=False) as runtime:
        orchestrator = _start_team(runtime, orchestrator_model, subagent_model, pace, scripted)
        sub = orchestrator.subscribe(max_queue=10_000, overflow="drop_oldest")
        reader = follow(sub, journal)
        presenter = Presenter(console, journal, lambda: take(runtime), title)
        operator = Operator(
            runtime,
            orchestrator,
            journal,
            timeout=(20.0 * max(pace, 1.0)) if scripted else 300.0,
            announce=lambda step: setattr(presenter, "step", step),
        )
        outcome = presenter.run(operator.play)
        final_tree, _ = take(runtime)
        sub.close()
        reader.join(5.0)
    wall = time.monotonic() - started
    passed = _passed(outcome.checks, strict=scripted)
    _report(console, presenter.live, journal, outcome, final_tree, wall, passed)
    return 0 if passed else 1


def _start_team(
    runtime: Runtime,
    orchestrator_model: ChatModel,
    subagent_model: ChatModel,
    pace: float,
    scripted: bool,
) -> Agent:
    """The orchestrator (transient, session memory) with a `delegate` tool whose subagents
    (researcher, critic, writer) share `subagent_model` and the notes tool."""
    subagent_options: dict[str, Any] = {
        "model": subagent_model,
        "system_prompt": SUBAGENT_PROMPT,
        "tools": [notes_tool(Pace(pace).lookup if scripted else 0.3)],
    }
    if scripted:  # the critic's scripted rate limit is retried after half a second
        subagent_options["retry"] = RetryPolicy(base_delay=0.5 * pace, max_delay=2.0 * pace)
    team = delegate(["researcher", "critic", "writer"], parallel_safe=True, **subagent_options)
    return runtime.start_agent(
        ORCHESTRATOR,
        model=orchestrator_model,
        system_prompt=ORCHESTRATOR_PROMPT,
        tools=[team],
        restart="transient",
    )


def _passed(checks: list[Check], *, strict: bool) -> bool:
    return all(c.held is True or (c.held is None and not strict) for c in checks)


def _report(
    console: Console,
    live: bool,
    journal: Journal,
    outcome: Outcome,
    final_tree: TreeView,
    wall: float,
    passed: bool,
) -> None:
    plain = not live
    if plain:
        console.print("supervision tree at the end:", highlight=False)
        console.print(render_tree(final_tree), highlight=False)
    console.print(summary_table(journal.tallies(), wall, plain=plain))
    marks = {True: "[green]✔[/]", False: "[red]✘[/]", None: "[yellow]-[/]"}
    lines = [
        f"{marks[c.held]} {escape(c.name)}" + (f" [dim]({escape(c.detail)})[/]" if c.detail else "")
        for c in outcome.checks
    ]
    console.print(Group(*(Text.from_markup(line) for line in lines)))
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


class _LogSink(io.StringIO):
    """Where the runtime's log lines go during the demo: the event log (JSON lines, shown as
    `level event key=value`), so nothing is written over the live view."""

    def __init__(self, journal: Journal) -> None:
        super().__init__()
        self._journal = journal
        self._lock = threading.Lock()
        self._partial = ""

    def write(self, text: str) -> int:
        with self._lock:
            self._partial += text
            *complete, self._partial = self._partial.split("\n")
        for line in complete:
            if line.strip():
                self._journal.note(_log_text(line), style="dim red", who="runtime")
        return len(text)


def _log_text(line: str) -> str:
    try:
        record = json.loads(line)
    except ValueError:
        return f"log: {line}"
    if not isinstance(record, dict):
        return f"log: {line}"
    level, event = record.pop("level", "log"), record.pop("event", "")
    record.pop("timestamp", None)
    facts = " ".join(f"{k}={v}" for k, v in record.items())
    return f"log {level} {event} {facts}".rstrip()
