"""`agent-runtime serve`: refuses to start without a token unless --insecure-no-auth (then on
127.0.0.1 only), serves the gateway with --token, and stops on SIGINT or SIGTERM with a stream
open (exit status 0: the runtime was stopped, not killed)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from agent_runtime.cli import main

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "cli-token-0123456789"


def test_serve_refuses_to_start_without_a_token(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve"]) == 2
    assert "no token" in capsys.readouterr().err


def test_insecure_no_auth_binds_only_to_loopback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--insecure-no-auth", "--host", "0.0.0.0"]) == 2
    assert "only to 127.0.0.1" in capsys.readouterr().err


def test_a_short_token_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--token", "short"]) == 2
    assert "at least 16 characters" in capsys.readouterr().err


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_a_port_out_of_range_is_refused_naming_it(
    capsys: pytest.CaptureFixture[str], port: str
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["serve", "--token", TOKEN, "--port", port])
    assert caught.value.code == 2
    assert f"invalid port {port}" in capsys.readouterr().err.replace("'", "")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_with_a_token_answers_it_and_stops_on_a_signal_with_a_stream_open(
    tmp_path: Path, stop: signal.Signals
) -> None:
    port = _free_port()
    config = tmp_path / "runtime.toml"
    config.write_text('[memory]\nstore = "memory"\n[telemetry]\nlog_level = "warning"\n')
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agent_runtime.cli._main",
            "serve",
            "--port",
            str(port),
            "--token",
            TOKEN,
            "--config",
            str(config),
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                first = httpx.get(f"{url}/openapi.json", timeout=2)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"serve did not start: {process.stderr.read()!r}") from None  # type: ignore[union-attr]
                time.sleep(0.05)
        assert first.status_code == 401
        headers = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.get(f"{url}/openapi.json", headers=headers).status_code == 200
        with httpx.stream("GET", f"{url}/v1/sessions/s/events", headers=headers, timeout=30) as sse:
            assert sse.status_code == 200
            process.send_signal(stop)
            for _ in sse.iter_lines():  # the stream ends when the server stops
                pass
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def _start_serving(
    tmp_path: Path, config_text: str, *extra: str
) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    config = tmp_path / "runtime.toml"
    config.write_text(config_text)
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "agent_runtime.cli._main", "serve", "--port", str(port)),
            *("--token", TOKEN, "--config", str(config), *extra),
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{url}/openapi.json", timeout=2)
            return process, url
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"serve did not start: {process.stderr.read()!r}") from None  # type: ignore[union-attr]
            time.sleep(0.05)


TOOLS = "tests.agent_runtime.server.served_tools"


def test_tools_of_the_config_and_of_tool_flags_can_be_given_to_agents(tmp_path: Path) -> None:
    process, url = _start_serving(
        tmp_path,
        '[memory]\nstore = "memory"\n[telemetry]\nlog_level = "warning"\n'
        f'[server]\ntools = ["{TOOLS}:add"]\n',
        "--tool",
        f"{TOOLS}:multiply",
    )
    try:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
            started = client.post(
                "/v1/agents/s/calc/0", json={"model": "scripted", "tools": ["add", "multiply"]}
            )
            assert started.status_code == 201, started.text
            unknown = client.post("/v1/agents/s/calc/1", json={"tools": ["divide"]})
            assert unknown.status_code == 422
            assert "registered tools: add, multiply" in unknown.json()["error"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        (f"{TOOLS}:nope", "has no 'nope'"),
        ("tests.agent_runtime.server.no_such_module:add", "cannot be imported"),
        (f"{TOOLS}:not_a_tool", "neither an agent_runtime Tool nor a function"),
        ("not-a-spec", "not of the form 'package.module:name'"),
    ],
)
def test_a_tool_that_cannot_be_imported_refuses_the_start_naming_the_entry(
    capsys: pytest.CaptureFixture[str], entry: str, named: str
) -> None:
    assert main(["serve", "--token", TOKEN, "--tool", entry]) == 2
    error = capsys.readouterr().err
    assert repr(entry) in error
    assert named in error


def test_a_malformed_tool_entry_of_the_config_is_a_config_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "runtime.toml"
    config.write_text('[server]\ntools = ["add"]\n')
    assert main(["serve", "--token", TOKEN, "--config", str(config)]) == 2
    error = capsys.readouterr().err
    assert "server.tools" in error
    assert "'add'" in error
