"""`make bench`: the hot path's figures against baselines measured in this same run.

Prints one table (figure, ours, baseline, ratio, target, PASS/MISS), the peers' figures where
their virtual environment exists (`make bench` builds it), and writes it all to
bench/RESULTS.md with the machine, the versions and the command. Medians of at least five
repetitions; absolute numbers depend on the machine, ratios much less. Nothing here is a test.
"""

from __future__ import annotations

import functools
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from agent_runtime.config import TelemetryConfig
from agent_runtime.telemetry import configure_logging
from bench import _figures as f
from bench._cluster import cluster_lines, run_cluster
from bench._peers import run_peers

REPS = 5
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"

# Why a figure misses its target (kept with the table in RESULTS.md).
REASONS: dict[str, str] = {
    # Why a figure misses its target, kept with the table in RESULTS.md (profiles of the
    # loop-actor core, 2026-12-06; docs/performance.md says more). This machine runs the same
    # code at ~1x or ~3x speed from one hour to the next: the shares hold, not the microseconds.
    "one text turn, p50": "the run's own work, not the hops (the floor is 0.66-1.3x): a flat "
    "profile, no function above 5%; in-process, about 270 us of a turn's loop CPU is fixed "
    "(the start, eight structural events, the actor's messages for start, commits and end, "
    "the caller's result) and each of the twenty deltas adds ~4.5 us with nobody listening "
    "(fast days' figures); a synchronous caller's turn also runs on a loop thread that has "
    "just woken, where the same Python work takes 1.3-2.1x as long as back to back (160 us "
    "against 210-340 us, 2026-12-07)",
    "one text turn, p99": "the p50's work and the machine's jitter (the threads' wake-ups): "
    "a run leaves nothing to the cyclic garbage collector, and no collection falls in 2,000 "
    "turns (one every ~17 turns before 2026-12-06's night)",
    "text turn with 3,000 messages, p50": "one copy of the history as a run starts and one "
    "per model call (the request's list, ~10 us each for 3,000 messages), and a larger heap "
    "under every step of the turn (15-25% slower each in a profile); it moves with the "
    "machine: 0.74-0.96x in interleaved runs on 2026-12-07, 1.14-1.30x an hour later",
    "one tool call then text, p50": "two model calls' work (see the text turn) and the "
    "tool's hop to the tool_tasks pool and back",
    "1000 concurrent runs of a 100 ms model, wall": "the floor alone is 1.8-2.3x: a synchronous "
    "prompt() and wait_for_idle() per agent from one thread, two round trips; above it each "
    "run's set-up and events",
    "2500 concurrent runs of a 100 ms model, wall": "as for 1000 runs; the floor alone is "
    "2.3-5.1x, moving with its baseline (over the target in some runs): the runs' own set-up "
    "and events above it",
    "1000 streamed deltas to one subscriber": "~9 us of CPU per delta on a fast day (26 us on a "
    "slow one), ~90% of it on the loop: the model's chunk and its abort check, the message "
    "builder, the per-token event and its snapshot; the target leaves 6.7 us",
    "1000 deltas, each of 10 subscribers": "ten reader threads for one GIL (the run's fan-out "
    "is one batch per subscription per loop step since 2026-12-07: ten subscriptions cost "
    "the loop about what one costs)",
    "RSS per idle agent (100,000 agents)": "an agent's actor, cell, validated options and "
    "supervisor records",
    "100,000 idle agents: start, state() each, stop": "the floor alone is 18-34 s: a bare loop "
    "actor per agent, started and asked from the caller's thread, two synchronous round "
    "trips per agent; above it the library's start work per agent (options validated, "
    "actor, cell, registry, monitors) and the collector",
    "100,000 idle agents on the runtime's loop (astart_agent, state(), astop)": "no hop and "
    "no thread (~50 us of start and ~37 us of stop per agent with the collector off, ~10 s "
    "in all); the rest is CPython's cyclic garbage collector: 27 tracked objects per agent "
    "(37 before 2026-12-07), and each full collection walks every agent started so far (14 "
    "of them took 7.5 s of 17.7-18.0 s in runs on 2026-12-07, 9.3-9.8 s of 19.3-21.3 s at 37)",
    "spawn + stop of an agent, p50": "the floor is 0.55-1.07x: the library's work per spawn "
    "and stop on the two threads (options validated, actor and cell, registry, monitors, "
    "log calls), ~120 us on a fast day, against an empty thread actor; on the runtime's loop "
    "(the row below it) the same agent starts and stops in a third of that actor's time",
}


@dataclass
class Row:
    figure: str
    ours: float
    base: float | None
    unit: str
    target: str
    passed: bool

    @property
    def ratio(self) -> str:
        return "" if not self.base else f"{self.ours / self.base:.2f}x"


def us(seconds: float) -> float:
    return seconds * 1e6


T = TypeVar("T")


def interleaved(**measures: Callable[[], T]) -> dict[str, list[T]]:
    """Each of `measures` once per round, in turn, for REPS rounds: the figure and its
    baseline (and floor) alternate, so the machine's drift over the minutes of a run (20% and
    more here) falls on both alike instead of on whichever is measured last."""
    results: dict[str, list[T]] = {name: [] for name in measures}
    for _ in range(REPS):
        for name, measure in measures.items():
            results[name].append(measure())
    return results


def measure() -> tuple[list[Row], list[Row]]:
    """The figures, and the floor of one bare loop actor per agent for five of them."""
    rows: list[Row] = []
    floor: list[Row] = []
    n = 300
    turns = interleaved(
        bare=lambda: f.bare_turns(n),
        floor=lambda: f.floor_turns(n),
        ours=lambda: f.text_turns(n),
        deep=lambda: f.text_turns(200, history=3000),
        read=lambda: f.text_turns(200, history=3000, from_memory=True),
    )
    bare_p50 = statistics.median(us(statistics.median(s)) for s in turns["bare"])
    least = statistics.median(us(statistics.median(s)) for s in turns["floor"])
    floor.append(Row("one text turn, p50", least, bare_p50, "us", "<= 3x", least <= 3 * bare_p50))
    p50 = statistics.median(us(f.percentile(s, 0.5)) for s in turns["ours"])
    p99 = statistics.median(us(f.percentile(s, 0.99)) for s in turns["ours"])
    rows.append(Row("one text turn, p50", p50, bare_p50, "us", "<= 3x", p50 <= 3 * bare_p50))
    rows.append(Row("one text turn, p99", p99, None, "us", "<= 1000 us", p99 <= 1000))
    deep = statistics.median(us(f.percentile(s, 0.5)) for s in turns["deep"])
    rows.append(
        Row(
            "text turn with 3,000 messages, p50",
            deep,
            p50,
            "us",
            "<= 1.2x empty",
            deep <= 1.2 * p50,
        )
    )
    read = statistics.median(us(f.percentile(s, 0.5)) for s in turns["read"])
    rows.append(
        Row(
            "text turn with 3,000 messages read from session memory, p50",
            read,
            p50,
            "us",
            "measured",
            True,
        )
    )
    tools = interleaved(bare=lambda: f.bare_turns(n, True), ours=lambda: f.tool_turns(n))
    bare_tool = statistics.median(us(statistics.median(s)) for s in tools["bare"])
    tool = statistics.median(us(f.percentile(s, 0.5)) for s in tools["ours"])
    rows.append(
        Row("one tool call then text, p50", tool, bare_tool, "us", "<= 4x", tool <= 4 * bare_tool)
    )
    for size, limit in ((1000, 2), (2500, 4)):
        walls = interleaved(
            ours=functools.partial(f.burst, size),
            base=functools.partial(f.bare_burst, size),
            floor=functools.partial(f.floor_burst, size),
        )
        ours, base, least = (statistics.median(walls[k]) * 1e3 for k in ("ours", "base", "floor"))
        name = f"{size} concurrent runs of a 100 ms model, wall"
        rows.append(Row(name, ours, base, "ms", f"<= {limit}x", ours <= limit * base))
        floor.append(Row(name, least, base, "ms", f"<= {limit}x", least <= limit * base))
    huge = f.burst(10_000) * 1e3  # completes: the figure, no target
    rows.append(
        Row("10000 concurrent runs of a 100 ms model, wall", huge, None, "ms", "completes", True)
    )
    rate = f.repeat(lambda: f.stream_rate(1000))
    rows.append(
        Row(
            "1000 streamed deltas to one subscriber",
            rate,
            None,
            "deltas/s",
            ">= 150k/s",
            rate >= 150_000,
        )
    )
    on_loop = f.repeat(lambda: f.stream_rate_in_place(1000))
    rows.append(
        Row(
            "1000 streamed deltas to one subscriber read on the runtime's loop (async for)",
            on_loop,
            None,
            "deltas/s",
            "measured",
            True,
        )
    )
    small = f.repeat(lambda: f.stream_rate(100))
    large = f.repeat(lambda: f.stream_rate(5000))
    rows.append(
        Row(
            "time per delta, 5,000 vs 100 deltas",
            1e6 / large,
            1e6 / small,
            "us/delta",
            "<= 1.2x (flat)",
            (1 / large) <= 1.2 * (1 / small),
        )
    )
    ten = f.repeat(lambda: f.stream_rate(1000, subscribers=10))
    rows.append(
        Row("1000 deltas, each of 10 subscribers", ten, None, "deltas/s", ">= 40k/s", ten >= 40_000)
    )
    many = f.many_idle_agents(100_000)
    rss = many["rss"] / 1024
    rows.append(Row("RSS per idle agent (100,000 agents)", rss, None, "KiB", "<= 8 KiB", rss <= 8))
    total = many["start"] + many["state"] + many["stop"]
    least = f.floor_many_idle(100_000)
    floor.append(
        Row(
            "100,000 idle agents: start, state() each, stop",
            least,
            None,
            "s",
            "<= 10 s",
            least <= 10,
        )
    )
    rows.append(
        Row(
            "100,000 idle agents: start, state() each, stop",
            total,
            None,
            "s",
            "<= 10 s",
            total <= 10,
        )
    )
    aio = f.many_idle_agents_in_place(100_000)
    aio_total = aio["start"] + aio["state"] + aio["stop"]
    rows.append(
        Row(
            "100,000 idle agents on the runtime's loop (astart_agent, state(), astop)",
            aio_total,
            None,
            "s",
            "<= 10 s",
            aio_total <= 10,
        )
    )
    rows.append(
        Row(
            "threads added by 100,000 agents",
            many["threads"],
            None,
            "threads",
            "0",
            many["threads"] == 0,
        )
    )
    cpu_turn = us(f.cpu_per_text_turn(300))
    rows.append(Row("CPU per text turn (all threads)", cpu_turn, None, "us", "measured", True))
    cpu_delta = us(f.cpu_per_delta(2000))
    rows.append(Row("CPU per streamed delta", cpu_delta, None, "us", "measured", True))
    starts = interleaved(
        ours=lambda: f.spawn_stop(200),
        actor=lambda: f.bare_actor_start_stop(200),
        in_place=lambda: f.spawn_stop_in_place(200),
        floor=lambda: f.floor_spawn_stop(200),
    )
    spawn, actor, aio_spawn, least = (
        statistics.median(us(statistics.median(s)) for s in starts[k])
        for k in ("ours", "actor", "in_place", "floor")
    )
    rows.append(Row("spawn + stop of an agent, p50", spawn, actor, "us", "<= 1.0x", spawn <= actor))
    rows.append(
        Row(
            "spawn + stop of an agent on the runtime's loop (astart_agent + astop), p50",
            aio_spawn,
            actor,
            "us",
            "<= 1.0x",
            aio_spawn <= actor,
        )
    )
    floor.append(
        Row("spawn + stop of an agent, p50", least, actor, "us", "<= 1.0x", least <= actor)
    )
    # Like every figure, a median of REPS: the p99 of 50 aborts was one sample's tail.
    abort_p99 = statistics.median(us(f.percentile(f.abort_latency(100), 0.99)) for _ in range(REPS))
    rows.append(
        Row(
            "abort of a hung stream to Canceled, p99",
            abort_p99,
            None,
            "us",
            "<= 2000 us",
            abort_p99 <= 2000,
        )
    )
    return rows, floor


def number(value: float, unit: str) -> str:
    if unit == "deltas/s":
        return f"{value / 1000:.1f}k/s"
    return f"{value:,.1f} {unit}" if value < 100 else f"{value:,.0f} {unit}"


def table(rows: list[Row]) -> list[str]:
    lines = [
        "| figure | agent-runtime | baseline | ratio | target | |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        base = "" if r.base is None else number(r.base, r.unit)
        verdict = "PASS" if r.passed else "MISS"
        ours = number(r.ours, r.unit)
        lines.append(f"| {r.figure} | {ours} | {base} | {r.ratio} | {r.target} | {verdict} |")
    return lines


def floor_lines(rows: list[Row]) -> list[str]:
    """The floor's table: what one bare loop actor per agent costs against the same
    baseline, and whether the target leaves any room above it."""
    lines = [
        "| figure | one bare loop actor per agent | baseline | ratio | target | |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        room = "room left" if r.passed else "over the target"
        base = "" if r.base is None else number(r.base, r.unit)
        ours = number(r.ours, r.unit)
        lines.append(f"| {r.figure} | {ours} | {base} | {r.ratio} | {r.target} | {room} |")
    return lines


def peer_lines(peers: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "| peer | text turn p50 | tool turn p50 | 1000 burst | 2500 burst | streamed deltas |",
        "|---|---|---|---|---|---|",
    ]
    for name, figures in peers.items():
        if "error" in figures:
            lines.append(f"| {name} | not run: {figures['error']} | | | | |")
            continue
        lines.append(
            f"| {name} | {figures['text_turn_us']['p50']:,.0f} us"
            f" | {figures['tool_turn_us']['p50']:,.0f} us"
            f" | {figures['burst_1000_ms']:,.0f} ms | {figures['burst_2500_ms']:,.0f} ms"
            f" | {figures['stream_deltas_per_s'] / 1000:.1f}k/s |"
        )
    return lines


def machine() -> str:
    cores = os.cpu_count()
    versions = ", ".join(
        f"{pkg} {metadata.version(pkg)}" for pkg in ("pykka", "pydantic", "httpx", "structlog")
    )
    return (
        f"{platform.machine()}, {cores} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}; {versions}"
    )


def main() -> None:
    configure_logging(TelemetryConfig(log_level="warning"))
    gc.collect()
    started = time.monotonic()
    rows, floor = measure()
    peers = run_peers()
    cluster = cluster_lines(run_cluster())
    lines = table(rows)
    print("\n".join(lines))
    print()
    print("\n".join(floor_lines(floor)))
    print()
    print("\n".join(peer_lines(peers)))
    print()
    print("\n".join(cluster))
    misses = [r.figure for r in rows if not r.passed]
    out = [
        "# Benchmark results",
        "",
        f"Machine: {machine()}.",
        "Command: `make bench` (medians of at least 5 repetitions; baselines measured in the "
        "same run, the turns', bursts' and spawns' in turn with their figures and floors, one "
        f"repetition each per round; {time.monotonic() - started:.0f} s in all).",
        "",
        *lines,
        "",
        "The floor of the design, measured in the same run: one bare `AsyncioActor` per agent "
        "on the loop that runs its runs, which starts each run as a task there and hears of "
        "its end, asked and waited for from the caller's thread as `run`, `prompt` and "
        "`wait_for_idle` ask an agent, with none of the library's work (bench/_figures.py, "
        "`FloorActor`). Its ratio to the same baseline is what the actors and the caller's "
        "hops cost before a run does anything; a target below it cannot be met while every "
        "agent is a pykka actor answering a synchronous caller:",
        "",
        *floor_lines(floor),
        "",
        "Peers (each with its own fake model, in its own virtual environment and process):",
        "",
        *peer_lines(peers),
        "",
        "Cluster (agent_runtime.cluster on a local Ray instance of 2 CPUs, its nodes actor "
        "processes of this machine):",
        "",
        *cluster,
    ]
    if misses:
        out += ["", "Why a figure misses its target:", ""]
        out += [f"- {m}: {REASONS.get(m, 'not yet explained')}" for m in misses]
    RESULTS.write_text("\n".join(out) + "\n")
    print(f"\nwritten to {RESULTS}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
