"""`make bench-host`: the host's loop lag with 100 SSE streams, against its floor.

Runs examples/starlette_sse.py under uvicorn (bench/_host_server.py, which adds `/floor`) in a
process of its own on 127.0.0.1, warms it up (one short stream of each route: the server's
first responses import and build what later ones reuse), then measures rounds of 100
concurrent streams of 400 words 10 ms apart (a tool call first), each round's loop lag read
from the example's `/lag` (how late a 10 ms sleep woke up):

- `control`: the run's events made on the server's loop without the library;
- `library, new agents` and `library, same agents`: `agent.astream` of the example's agents,
  started by the round (one per session), then the same sessions again;
- `floor, new actors` and `floor, same actors`: the control's events through one bare loop
  actor per session (bench/_host_server.py says what it is told), no library code.

Each repetition is a fresh server; the table has the medians, and each round's ratio to the
control of its own server. `BENCH_HOST_REPS` (3) and `BENCH_HOST_KINDS` (`library,floor`)
change what it runs. Nothing here is a test.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

SERVER = Path(__file__).resolve().parent / "_host_server.py"
CLIENTS = 100
WORDS = 400
REPS = int(os.environ.get("BENCH_HOST_REPS", "3"))
# Which servers to measure ("library", "floor"; both by default), e.g. to repeat one quickly.
KINDS = [k for k in os.environ.get("BENCH_HOST_KINDS", "").split(",") if k]
ROUNDS = {
    "library": [
        ("control", "/control", "c"),
        ("new agents", "/runs", "s"),
        ("same agents", "/runs", "s"),
    ],
    "floor": [
        ("control", "/control", "c"),
        ("new actors", "/floor", "f"),
        ("same actors", "/floor", "f"),
    ],
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def server() -> Iterator[str]:
    """The example (and `/floor`) on a free port, killed at the end, also on failure."""
    port = free_port()
    root = str(SERVER.parents[1])
    env = {**os.environ, "PYTHONPATH": root}
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                _, err = process.communicate(timeout=10)
                raise RuntimeError(f"the server did not start: {err.decode(errors='replace')}")
            time.sleep(0.05)
        yield url
    finally:
        process.kill()
        process.wait(10)


async def stream(client: httpx.AsyncClient, url: str, session: str) -> int:
    """One SSE stream read to its end; how many events it had."""
    events = 0
    async with client.stream("POST", url, json={"session": session, "prompt": "hi"}) as resp:
        resp.raise_for_status()
        async for line in resp.aiter_lines():
            events += line.startswith("data: ")
    return events


async def round_lag(
    url: str, path: str, prefix: str, words: int = WORDS, clients: int = CLIENTS
) -> tuple[float, float]:
    """`clients` concurrent streams of `path` (sessions prefix-0...); the loop's p95 and worst
    lag over the round, in seconds."""
    limits = httpx.Limits(max_connections=clients + 10)
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:
        await client.get(f"{url}/lag", params={"reset": "1"})
        query = f"{url}{path}?chunks={words}&delay=0.01"
        counts = await asyncio.gather(
            *(stream(client, query, f"{prefix}-{i}") for i in range(clients))
        )
        if len(set(counts)) != 1:
            raise RuntimeError(f"{path}: streams of different lengths: {sorted(set(counts))}")
        report = (await client.get(f"{url}/lag")).json()
    return float(report["p95_lag"]), float(report["worst_lag"])


def measure() -> dict[str, list[tuple[str, float, float, float]]]:
    """For each server kind, its rounds: (name, p95, worst, worst / its control's worst)."""
    samples: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for rep in range(REPS):
        for kind, rounds in ROUNDS.items():
            if KINDS and kind not in KINDS:
                continue
            with server() as url:
                for path in ("/control", "/runs", "/floor"):
                    asyncio.run(round_lag(url, path, f"warm-{path}", words=2, clients=1))
                control_worst = 0.0
                for name, path, prefix in rounds:
                    p95, worst = asyncio.run(round_lag(url, path, f"{prefix}{rep}"))
                    if name == "control":
                        control_worst = worst
                    samples.setdefault((kind, name), []).append((p95, worst, worst / control_worst))
    out: dict[str, list[tuple[str, float, float, float]]] = {}
    for (kind, name), rows in samples.items():
        p95, worst, ratio = (statistics.median(col) for col in zip(*rows, strict=True))
        out.setdefault(kind, []).append((name, p95, worst, ratio))
    return out


def main() -> None:
    started = time.monotonic()
    results = measure()
    lines = [
        f"Host loop lag, {CLIENTS} SSE streams of {WORDS} words (medians of {REPS} fresh "
        f"servers, each warmed up; {time.monotonic() - started:.0f} s):",
        "",
        "| server | round | loop lag p95 | worst | worst / its control's |",
        "|---|---|---|---|---|",
    ]
    for kind, rows in results.items():
        for name, p95, worst, ratio in rows:
            lines.append(
                f"| {kind} | {name} | {p95 * 1e3:.0f} ms | {worst * 1e3:.0f} ms | {ratio:.2f}x |"
            )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
