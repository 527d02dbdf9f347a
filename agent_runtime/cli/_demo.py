"""`agent-runtime demo`: an offline showcase of supervision, delegation, streaming and abort.

It needs no API key: every model is a ScriptedModel. What it shows is real: actors under
the runtime's supervision tree, a lead agent delegating to two researchers in parallel whose
streamed events reach the lead's subscriber tagged with their keys, an abort that pairs every
tool call, a continued run, and a crashed subagent that does not take its parent down.
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.markup import escape

from agent_runtime.agent._delegate import delegate
from agent_runtime.cli._tree import render_tree
from agent_runtime.config import MemoryConfig, RuntimeConfig, TelemetryConfig
from agent_runtime.events import (
    AgentEnd,
    Canceled,
    Error,
    Event,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from agent_runtime.loop import validate_transcript
from agent_runtime.messages import ToolCall
from agent_runtime.runtime import Runtime
from agent_runtime.testing import ScriptedModel, ScriptedTurn
from agent_runtime.tools import tool
from supervisors import kill

COLORS = {"lead": "bold cyan", "researcher": "green", "scratch": "magenta"}


def _who(event: Event) -> str:
    key = event.agent
    if key is None:
        return "?"
    color = COLORS.get(key.role, "white")
    return f"[{color}]{key.role}/{key.index}[/]"


def _show(console: Console, event: Event) -> None:
    who = _who(event)
    if isinstance(event, MessageUpdate) and event.delta.kind == "text":
        console.print(f"  {who} [dim]…[/]{escape(event.delta.delta)}", highlight=False)
    elif isinstance(event, ToolExecutionStart):
        console.print(f"  {who} ▶ {event.name}({escape(str(event.args))})", highlight=False)
    elif isinstance(event, ToolExecutionEnd):
        outcome = "[red]error[/]" if event.is_error else "[green]ok[/]"
        text = escape(" ".join(c.text for c in event.result.content if c.type == "text")[:70])
        console.print(f"  {who} ◀ {event.name} {outcome} {text}", highlight=False)
    elif isinstance(event, AgentEnd | Error | Canceled):
        console.print(f"  {who} ■ {type(event).__name__}", highlight=False)


def _research_turns(topic: str) -> list[ScriptedTurn | str]:
    words = f"{topic} is well supervised: restarts are bounded and cheap.".split(" ")
    return [ScriptedTurn(chunks=[w + " " for w in words], chunk_delay=0.02)]


def _lead_turns() -> list[ScriptedTurn | str]:
    calls = [
        ToolCall(id="d1", name="delegate", arguments={"role": "researcher", "task": "pykka"}),
        ToolCall(id="d2", name="delegate", arguments={"role": "researcher", "task": "OTP"}),
    ]
    summary = "Both researchers agree: supervision trees keep agents alive. "
    return [
        ScriptedTurn(tool_calls=calls),
        ScriptedTurn(chunks=summary.split(" "), chunk_delay=0.01),
    ]


def run_demo(console: Console | None = None) -> int:
    """Run the showcase; returns a process exit code (0 when every check held)."""
    console = console or Console()
    # In-memory session store: the showcase starts from a clean slate every time it runs.
    config = RuntimeConfig(
        telemetry=TelemetryConfig(log_level="warning"), memory=MemoryConfig(store="memory")
    )
    ok = True
    with Runtime.start(config, name="demo") as runtime:
        console.rule("1. a lead agent delegates to two researchers in parallel")
        researchers = ScriptedModel(_research_turns("pykka") + _research_turns("OTP"))
        lead = runtime.start_agent(
            ("demo", "lead", 0),
            model=ScriptedModel(_lead_turns()),
            system_prompt="You coordinate research.",
            tools=[delegate(["researcher"], parallel_safe=True, model=researchers)],
        )
        started = time.monotonic()
        for event in lead.stream("What keeps agents alive?"):
            _show(console, event)
        console.print(
            f"  done in {time.monotonic() - started:.2f}s; live agents: "
            f"{[tuple(a.key) for a in runtime.subagents.list()]}"
        )

        console.rule("2. abort mid-tool: every call is paired, the run can continue")

        @tool
        def slow_search(query: str) -> str:
            """Searches slowly (ignores the abort, so the grace period applies)."""
            time.sleep(1.0)
            return f"results for {query}"

        scratch_model = ScriptedModel(
            [
                ScriptedTurn(
                    tool_calls=[ToolCall(id="s1", name="slow_search", arguments={"query": "x"})]
                ),
                "Resumed after the abort.",
            ]
        )
        scratch = runtime.start_agent(
            ("demo", "scratch", 0), model=scratch_model, tools=[slow_search]
        )
        scratch.prompt("search")
        _wait(lambda: scratch.state().pending_tool_calls == ["s1"])
        scratch.abort("user_abort")
        scratch.wait_for_idle(timeout=5)
        history = scratch.state().messages
        valid = not validate_transcript(history)
        ok &= valid
        last = history[-1]
        console.print(
            f"  transcript valid: {valid}; last message: {last.role} "
            f"{getattr(last, 'details', None)}"
        )
        scratch.continue_run()
        scratch.wait_for_idle(timeout=5)
        console.print(f"  continued: {scratch.state().messages[-1].text!r}")

        console.rule("3. a crashed subagent is not restarted and its parent is untouched")
        victim = runtime.registry.lookup(("demo", "researcher", 0))
        if victim is not None:
            kill(victim.ref, "demo crash")
            _wait(lambda: runtime.registry.lookup(("demo", "researcher", 0)) is None)
        ok &= lead.alive
        console.print(
            f"  lead alive: {lead.alive}; agents now: "
            f"{[tuple(a.key) for a in runtime.subagents.list()]}"
        )

        console.rule("4. the supervision tree")
        console.print(render_tree(runtime))
    console.print("[bold green]demo finished[/]" if ok else "[bold red]demo checks failed[/]")
    return 0 if ok else 1


def _wait(predicate: object, timeout: float = 5.0) -> None:
    from agent_runtime.testing import wait_until

    wait_until(predicate, timeout=timeout)  # type: ignore[arg-type]
