"""Timing rules shared by the peer benchmarks, so every peer is measured the same way.

The peer scripts run with `bench/.venv-peers/bin/python`, which has the peers installed and not
agent-runtime; they import this module from their own directory. Guarantees:
- every figure is the median over `reps` repetitions, each started after a `gc.collect()`;
- a turn is timed alone, from the call to the returned result, with a fresh (empty) history;
- a burst is the wall time of `asyncio.gather` over runs started together, one per agent;
- a stream rate counts only the text deltas the caller received, and fails if any are missing;
- after `forbid_network()`, any attempt to resolve a name or open a connection raises.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import json
import logging
import platform
import socket
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from importlib import metadata
from typing import Any, NoReturn

Run = Callable[[], Awaitable[object]]


@dataclasses.dataclass(frozen=True)
class Plan:
    """How much each figure runs; reported beside the figures so a reader knows what ran."""

    reps: int = 5
    turns: int = 200
    tool_turns: int = 100
    deltas: int = 1000
    bursts: tuple[int, ...] = (1000, 2500)
    model_delay_s: float = 0.1


def plan_from_argv() -> Plan:
    """The full plan, or with `--quick` a one-repetition miniature for developing a script."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="one short repetition of each figure")
    if parser.parse_args().quick:
        return Plan(reps=1, turns=20, tool_turns=20, deltas=100, bursts=(100, 250))
    return Plan()


def quiet_logs() -> None:
    """Send every logger's output to stderr at warning level, as the main bench runs ours."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, force=True)


def forbid_network() -> None:
    """Make name resolution and outgoing connections raise, proving the fakes stay local."""

    def refuse(*args: object, **kwargs: object) -> NoReturn:
        raise OSError(f"network access attempted during a peer benchmark: {args!r}")

    socket.getaddrinfo = refuse
    socket.create_connection = refuse
    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.socket.connect_ex = refuse  # type: ignore[method-assign]


async def turn_us(run_once: Run, turns: int, reps: int) -> dict[str, float]:
    """p50 and p99 of one awaited run, in µs: the median of each over `reps` rounds of `turns`."""
    p50s: list[float] = []
    p99s: list[float] = []
    clock = time.perf_counter
    for _ in range(reps):
        gc.collect()
        samples: list[float] = []
        for _ in range(turns):
            started = clock()
            await run_once()
            samples.append((clock() - started) * 1e6)
        cuts = statistics.quantiles(samples, n=100, method="inclusive")
        p50s.append(cuts[49])
        p99s.append(cuts[98])
    return {"p50": round(statistics.median(p50s), 1), "p99": round(statistics.median(p99s), 1)}


async def burst_ms(runs: Sequence[Run], reps: int) -> float:
    """Median wall time, in ms, of all `runs` started together and gathered on this loop.

    Each run should hold its own agent, as each of ours is its own actor: an agent object shared
    by concurrent runs measures the peer's sharing, not its runs (see the OpenAI Agents script).
    """
    walls: list[float] = []
    for _ in range(reps):
        gc.collect()
        started = time.perf_counter()
        await asyncio.gather(*(run() for run in runs))
        walls.append((time.perf_counter() - started) * 1e3)
    return round(statistics.median(walls), 1)


async def deltas_per_s(
    stream_once: Callable[[], Awaitable[int]], expected: int, reps: int
) -> float:
    """Median rate of text deltas received by the caller over one streamed run each repetition.

    Raises:
        RuntimeError: a run delivered a different number of deltas than `expected`.
    """
    rates: list[float] = []
    for _ in range(reps):
        gc.collect()
        started = time.perf_counter()
        received = await stream_once()
        elapsed = time.perf_counter() - started
        if received != expected:
            raise RuntimeError(f"the caller received {received} text deltas (expected {expected})")
        rates.append(received / elapsed)
    return round(statistics.median(rates))


async def figures(
    peer: str,
    plan: Plan,
    started: float,
    text_turn: Run,
    tool_turn: Run,
    burst_runs: Sequence[Run],
    stream_once: Callable[[], Awaitable[int]],
    distributions: Sequence[str],
) -> dict[str, object]:
    """Every figure of one peer, after a warm-up (50 burst runs and one streamed run)."""
    await burst_ms(burst_runs[:50], 1)
    await stream_once()
    result: dict[str, object] = {
        "peer": peer,
        "text_turn_us": await turn_us(text_turn, plan.turns, plan.reps),
        "tool_turn_us": await turn_us(tool_turn, plan.tool_turns, plan.reps),
    }
    for n in plan.bursts:
        result[f"burst_{n}_ms"] = await burst_ms(burst_runs[:n], plan.reps)
    result["stream_deltas_per_s"] = await deltas_per_s(stream_once, plan.deltas, plan.reps)
    result["plan"] = dataclasses.asdict(plan)
    result["versions"] = versions(*distributions)
    result["elapsed_s"] = round(time.perf_counter() - started, 1)
    return result


def versions(*distributions: str) -> dict[str, str]:
    """Installed versions of `distributions`, plus the interpreter's."""
    found = {name: metadata.version(name) for name in distributions}
    return found | {"python": platform.python_version()}


def emit(result: dict[str, Any]) -> None:
    """Print `result` as the script's single line of JSON on stdout."""
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
