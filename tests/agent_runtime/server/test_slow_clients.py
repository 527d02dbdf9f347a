"""`agent-runtime serve` against the slow-client probe: 1,000 half-sent requests (headers
never finished) do not keep token holders out, and are closed after `server.header_timeout`;
a stream whose request was complete is never cut by it, nor closed to make room."""

from __future__ import annotations

import asyncio
import os
import resource
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from agent_runtime.testing import wait_until

uvicorn = pytest.importorskip(
    "uvicorn", reason="needs the server extra: pip install -e '.[server]'"
)

from agent_runtime.server._connections import ConnectionGuard  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "slow-token-0123456789"
HALF_SENT = 1000  # the probe's shape: 1,000 half-sent requests, against the default cap
HEADER_TIMEOUT = 2.0
FDS = 4096  # file descriptors the test and the server need: the flood, plus room


def _enough_file_descriptors() -> None:
    """Raise this process's soft limit on open files (the server inherits it) to FDS, or skip
    when the hard limit does not allow it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < FDS:
        if hard != resource.RLIM_INFINITY and hard < FDS:
            pytest.skip(f"needs {FDS} open files, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (FDS, hard))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def served(tmp_path: Path, server: str) -> Iterator[str]:
    """`agent-runtime serve` in a process of its own with `[server]` lines `server`."""
    port = _free_port()
    config = tmp_path / "runtime.toml"
    config.write_text(
        '[memory]\nstore = "memory"\n[telemetry]\nlog_level = "warning"\n[server]\n' + server
    )
    command = ["serve", "--port", str(port), "--token", TOKEN, "--config", str(config)]
    process = subprocess.Popen(
        [sys.executable, "-m", "agent_runtime.cli._main", *command],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{url}/openapi.json", timeout=2)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"serve did not start: {process.stderr.read()!r}") from None  # type: ignore[union-attr]
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _half_sent(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"GET /v1/tree HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1\r\n")  # no blank line
    return sock


def _closed(sock: socket.socket) -> bool:
    """Whether the server closed `sock` (EOF or reset), without blocking."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(4096) == b""
    except OSError:
        return True


@pytest.mark.timing
def test_serve_answers_token_holders_under_half_sent_requests_and_closes_those(
    tmp_path: Path,
) -> None:
    _enough_file_descriptors()
    # max_connections is left at its default (1,000): the flood fills it, and each token
    # holder's connection past it closes the half-sent request that waited longest.
    settings = f"header_timeout = {HEADER_TIMEOUT}\nsse_keepalive = 0.2\n"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with served(tmp_path, settings) as url:
        port = int(url.rsplit(":", 1)[1])
        with httpx.stream("GET", f"{url}/v1/sessions/s/events", headers=headers, timeout=30) as sse:
            assert sse.status_code == 200
            lines = sse.iter_lines()
            flooded_at = time.monotonic()
            slow = [_half_sent(port) for _ in range(HALF_SENT)]
            try:
                answered = []
                for _ in range(20):  # token holders, each on a new connection, during the flood
                    reply = httpx.get(f"{url}/v1/tree", headers=headers, timeout=5)
                    answered.append(reply.status_code)
                assert answered == [200] * 20  # the cap was full of half-sent: room was made
                deadline = time.monotonic() + HEADER_TIMEOUT + 10
                while not all(_closed(sock) for sock in slow):
                    assert time.monotonic() < deadline, (
                        f"{sum(not _closed(s) for s in slow)} half-sent requests still open"
                    )
                    time.sleep(0.1)
                closed_after = time.monotonic() - flooded_at
            finally:
                for sock in slow:
                    sock.close()
            # The stream whose request was complete outlived the header timeout and the flood:
            # past what it buffered meanwhile, it still sends keep-alives.
            alive_until = time.monotonic() + 1.0
            still_open = False
            for _ in lines:
                if time.monotonic() > alive_until:
                    still_open = True
                    break
            assert still_open
        assert closed_after < HEADER_TIMEOUT + 10


def test_past_the_cap_with_every_connection_busy_a_new_one_is_answered_503() -> None:
    release = threading.Event()

    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        if scope["type"] != "http":
            return
        while not release.is_set():  # a request in progress until the test lets it go
            await asyncio.sleep(0.01)
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"ok"})  # type: ignore[operator]

    guard = ConnectionGuard(header_timeout=5.0, max_connections=2)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app, http=guard.protocol(), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, timeout=15, what="uvicorn started")
        results: list[int] = []

        def busy() -> None:
            results.append(httpx.get(url, timeout=30).status_code)

        holders = [threading.Thread(target=busy) for _ in range(2)]
        for holder in holders:
            holder.start()
        wait_until(lambda: len(server.server_state.tasks) == 2, timeout=10, what="2 requests")
        refused = httpx.get(url, timeout=10)
        assert refused.status_code == 503
        assert "max_connections" in refused.text
        assert guard.refused == 1 and guard.evicted == 0
        release.set()
        for holder in holders:
            holder.join(30)
        assert results == [200, 200]
    finally:
        release.set()
        server.should_exit = True
        thread.join(15)
        sock.close()
