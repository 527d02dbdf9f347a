"""examples/starlette_sse.py under uvicorn on 127.0.0.1: 100 concurrent SSE clients and a
`/healthz` poller. The server's loop lag stays within 2x of the same events made on the
server's loop without the library, every stream gets exactly one terminal, and SIGINT ends
every open stream with `Canceled(runtime_stopping)` and the server within 5 s."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

pytest.importorskip("uvicorn", reason="needs uvicorn and starlette: pip install --group dev")
pytest.importorskip("starlette", reason="needs uvicorn and starlette: pip install --group dev")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "starlette_sse.py"
TERMINALS = {"agent_end", "error", "canceled"}
CLIENTS = 100
FLOOR = 0.003  # seconds: see the lag assertion
SUFFIX = str(time.time())


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def running_server() -> Iterator[Server]:
    """The example under uvicorn on a free port, killed at the end (also on failure)."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the example did not start: {process.stderr.read()!r}")  # type: ignore[union-attr]
            time.sleep(0.05)
        yield Server(process, url)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


@pytest.fixture
def server() -> Iterator[Server]:
    with running_server() as running:
        yield running


@dataclass
class Stream:
    raw: list[tuple[str, str]] = field(default_factory=list)  # parsed after the load
    first_at: float | None = None

    @property
    def events(self) -> list[tuple[str, dict[str, object]]]:
        return [(name, json.loads(data)) for name, data in self.raw]

    @property
    def terminals(self) -> list[str]:
        return [name for name, _ in self.raw if name in TERMINALS]


async def read_stream(client: httpx.AsyncClient, url: str, session: str, stream: Stream) -> None:
    name = ""
    async with client.stream("POST", url, json={"session": session, "prompt": "hi"}) as resp:
        assert resp.status_code == 200, await resp.aread()
        async for line in resp.aiter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                if stream.first_at is None:
                    stream.first_at = time.perf_counter()
                stream.raw.append((name, line[6:]))


POLLER = """
import sys, time, httpx
url, worst = sys.argv[1], 0.0
with httpx.Client(timeout=60) as client:
    while not sys.stdin.readline().strip():  # an empty line: poll once more
        started = time.perf_counter()
        client.get(url)
        worst = max(worst, time.perf_counter() - started)
print(worst, flush=True)
"""


class HealthPoller:
    """`/healthz` polled every 50 ms from a process of its own (the test's clients would
    delay its replies otherwise); `stop()` gives the worst latency seen."""

    def __init__(self, url: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", POLLER, f"{url}/healthz"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    async def poll_while(self, tasks: list[asyncio.Task[None]]) -> None:
        assert self.process.stdin is not None
        while not all(t.done() for t in tasks):
            self.process.stdin.write("\n")
            self.process.stdin.flush()
            await asyncio.sleep(0.05)

    def stop(self) -> float:
        out, _ = self.process.communicate("stop\n", timeout=30)
        return float(out)


@dataclass
class Lag:
    worst: float
    p95: float


async def load(server: Server, path: str, chunks: int) -> tuple[list[Stream], float, Lag]:
    """CLIENTS concurrent streams of `path`; the worst /healthz latency and the server loop's
    lag (worst and 95th percentile of how late a 10 ms sleep woke up)."""
    limits = httpx.Limits(max_connections=CLIENTS + 10)
    poller = HealthPoller(server.url)
    try:
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:
            await client.get(f"{server.url}/lag", params={"reset": "1"})
            streams = [Stream() for _ in range(CLIENTS)]
            url = f"{server.url}{path}?chunks={chunks}&delay=0.01"
            tasks = [
                asyncio.create_task(read_stream(client, url, f"{path}-{i}-{SUFFIX}", s))
                for i, s in enumerate(streams)
            ]
            await poller.poll_while(tasks)
            await asyncio.gather(*tasks)
            report = (await client.get(f"{server.url}/lag")).json()
    finally:
        worst_health = poller.stop()
    return streams, worst_health, Lag(float(report["worst_lag"]), float(report["p95_lag"]))


@dataclass
class Measured:
    control: list[Stream]
    control_health: float
    control_lag: Lag
    runs: list[Stream]
    health: float
    lag: Lag


async def warm_up(server: Server) -> None:
    """One short stream of each route: the server's first responses import and build what
    later ones reuse (~40-60 ms of the first round's lag), which neither round should pay."""
    async with httpx.AsyncClient(timeout=30) as client:
        for path in ("/control", "/runs"):
            url = f"{server.url}{path}?chunks=2&delay=0.01"
            await read_stream(client, url, f"warm-up-{SUFFIX}", Stream())


@pytest.fixture(scope="module")
def measured() -> Iterator[Measured]:
    """The control's streams, then the library's, on one warmed-up server (measured once)."""
    with running_server() as server:
        asyncio.run(warm_up(server))
        control = asyncio.run(load(server, "/control", 400))
        runs = asyncio.run(load(server, "/runs", 400))
    result = Measured(*control, *runs)
    lag, control_lag = result.lag, result.control_lag
    print(
        f"\nloop lag p95/worst: control {control_lag.p95 * 1e3:.0f}/{control_lag.worst * 1e3:.0f}"
        f" ms, library {lag.p95 * 1e3:.0f}/{lag.worst * 1e3:.0f} ms; /healthz worst: control"
        f" {result.control_health * 1e3:.0f} ms, library {result.health * 1e3:.0f} ms"
    )
    yield result


@pytest.mark.host_load
def test_100_streams_each_get_every_event_once_and_the_host_loop_stays_responsive(
    measured: Measured,
) -> None:
    assert all(s.terminals == ["agent_end"] for s in measured.control)
    for stream in measured.runs:
        assert stream.terminals == ["agent_end"]
        assert stream.events[-1][0] == "agent_end"
        seqs = [int(data["seq"]) for _, data in stream.events]  # type: ignore[call-overload]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        # 400 words, and the tool call of the first turn as one delta
        assert sum(name == "message_update" for name, _ in stream.events) == 401
        # the control makes the same events: it is a baseline for this very load
        assert [name for name, _ in stream.raw] == [name for name, _ in measured.control[0].raw]
    # Sanity bounds: ~12 s each before the async readers took batches and yielded between
    # them; worst lag 30-62 ms and /healthz 17-62 ms on 2026-12-07's evening, on a
    # warmed-up server (the control: 6-24 ms and 6-11 ms).
    assert measured.lag.worst < 0.5, measured.lag
    assert measured.health < 1.0, (measured.health, measured.control_health)


@pytest.mark.host_load
@pytest.mark.xfail(
    strict=False,
    reason="issue 34's target, met in some runs and not in others: since runs take the "
    "loop's iterations in turn (agent/_loop_share.py) the library's worst lag is 16-33 ms "
    "against a control's 5-33 (2026-12-07, evening; 38-68 ms before); what is left is the "
    "requests' own handling, the SSE responses' steps and the garbage collector's full "
    "collections (15-26 ms when one falls in the round); `make bench-host` measures it "
    "(docs/performance.md)",
)
def test_100_streams_keep_the_host_loop_lag_within_twice_the_control(
    measured: Measured,
) -> None:
    # A control under FLOOR counts as FLOOR: epoll wakes a sleep in whole milliseconds, so a
    # quiet control measures ~1 ms. With a loop thread of the runtime's own
    # (`share_loop=False`, as before astart shared the host's loop) the p95 is 9 ms or more.
    lag, control = measured.lag, measured.control_lag
    assert lag.p95 <= 2 * max(control.p95, FLOOR), (lag, control)
    assert lag.worst <= 2 * control.worst, (lag, control)


def test_a_session_answers_every_run_not_only_its_first(server: Server) -> None:
    """The session's agent is made at its first request; its later runs stream alike (the
    offline model answers every run, not a script of one)."""

    async def main() -> list[Stream]:
        streams = [Stream(), Stream()]
        async with httpx.AsyncClient(timeout=30) as client:
            for stream in streams:
                url = f"{server.url}/runs?chunks=3&delay=0"
                await read_stream(client, url, f"again-{SUFFIX}", stream)
        return streams

    first, second = asyncio.run(main())
    assert first.terminals == second.terminals == ["agent_end"]
    assert [name for name, _ in second.raw] == [name for name, _ in first.raw]


@pytest.mark.timing
def test_sigint_ends_every_open_stream_with_a_terminal_and_the_server_within_5s(
    server: Server,
) -> None:
    async def main() -> tuple[list[Stream], float]:
        limits = httpx.Limits(max_connections=CLIENTS + 10)
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:
            streams = [Stream() for _ in range(CLIENTS)]
            url = f"{server.url}/runs?chunks=5000&delay=0.01"
            tasks = [
                asyncio.create_task(read_stream(client, url, f"stop-{i}", s))
                for i, s in enumerate(streams)
            ]
            deadline = time.monotonic() + 30
            while not all(s.first_at for s in streams):
                assert time.monotonic() < deadline, "not every stream started"
                await asyncio.sleep(0.05)
            server.process.send_signal(signal.SIGINT)
            signalled = time.perf_counter()
            await asyncio.wait_for(asyncio.gather(*tasks), 10)
            exited = await asyncio.to_thread(server.process.wait, 10)
            assert exited is not None
            return streams, time.perf_counter() - signalled

    streams, took = asyncio.run(main())
    for stream in streams:
        assert stream.terminals == ["canceled"]
        assert stream.events[-1][1]["reason"] == "runtime_stopping"
    assert took < 5, took
