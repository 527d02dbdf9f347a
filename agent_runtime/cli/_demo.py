"""`agent-runtime demo`: an orchestrator and three subagents of one session, shown live.

Offline by default: every model is scripted (`_demo_script`), with the latencies of a
hosted model, and the whole story takes about 20 s. `profile=` runs the same story on the
model of a config profile (e.g. `local`). What it shows is real: actors under the
runtime's supervision tree, delegation (two subagents at once), steering, abort and
continue, crash isolation, and a `transient` agent restarted with its history from
session memory. The view is `_live.Presenter`; the story and its checks `_demo_scenario`.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from agent_runtime import telemetry
from agent_runtime._errors import ConfigError
from agent_runtime.agent import Agent, delegate
from agent_runtime.cli._demo_scenario import Check, Operator
from agent_runtime.cli._demo_script import (
    ORCHESTRATOR_PROMPT,
    SUBAGENT_PROMPT,
    Pace,
    offline_models,
)
from agent_runtime.cli._journal import Journal, follow
from agent_runtime.cli._live import Presenter, print_report
from agent_runtime.cli._log_sink import LogSink
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
    if profile is None:
        orchestrator_model, subagent_model = offline_models(Pace(pace))
        cast = _Cast("agent-runtime demo · offline (scripted models)", True, pace)
    else:
        orchestrator_model = from_config(profile, config=cfg)
        subagent_model = from_config(profile, config=cfg)
        cast = _Cast(f"agent-runtime demo · model profile {profile!r}", False, pace)
    journal = Journal()
    # The runtime's log lines join the event log while the demo runs, then go to stderr.
    configured = telemetry.configure_logging(cfg.telemetry, stream=LogSink(journal))
    try:
        with Runtime.start(cfg, name="demo", configure_logging=False) as runtime:
            team = _start_team(runtime, orchestrator_model, subagent_model, cast)
            return _play(console, runtime, team, journal, cast)
    finally:
        if configured:
            telemetry.configure_logging(cfg.telemetry, force=True)


@dataclass(frozen=True)
class _Cast:
    title: str
    scripted: bool  # every step must happen (with a real model one may be skipped)
    pace: float


def _play(
    console: Console, runtime: Runtime, orchestrator: Agent, journal: Journal, cast: _Cast
) -> int:
    started = time.monotonic()
    sub = orchestrator.subscribe(max_queue=10_000, overflow="drop_oldest")
    reader = follow(sub, journal)
    presenter = Presenter(console, journal, lambda: (runtime.tree(), runtime.stats()), cast.title)
    operator = Operator(
        runtime,
        orchestrator,
        journal,
        timeout=20.0 * max(cast.pace, 1.0) if cast.scripted else 300.0,
        announce=lambda step: setattr(presenter, "step", step),
    )
    try:
        outcome = presenter.run(operator.play)
    finally:
        sub.close()
        reader.join(5.0)
    wall = time.monotonic() - started
    passed = _passed(outcome.checks, strict=cast.scripted)
    final = runtime.tree(), runtime.stats()
    print_report(console, presenter.live, journal, outcome, *final, wall, passed)
    return 0 if passed else 1


def _start_team(
    runtime: Runtime,
    orchestrator_model: ChatModel,
    subagent_model: ChatModel,
    cast: _Cast,
) -> Agent:
    """The orchestrator (transient, session memory) with a `delegate` tool whose subagents
    (researcher, critic, writer) share `subagent_model` and the notes tool."""
    subagent_options: dict[str, Any] = {
        "model": subagent_model,
        "system_prompt": SUBAGENT_PROMPT,
        "tools": [notes_tool(Pace(cast.pace).lookup if cast.scripted else 0.3)],
    }
    if cast.scripted:  # the critic's scripted rate limit is retried after half a second
        pace = cast.pace
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
