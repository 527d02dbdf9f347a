"""telemetry.status_socket and `agent-runtime top`: a runtime watched from another process."""

from __future__ import annotations

import io
import os
import pty
import select
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from agent_runtime import AgentKey, ConfigError, Runtime, cli
from agent_runtime.cli._top import run_top
from agent_runtime.config import MemoryConfig, RuntimeConfig, TelemetryConfig
from agent_runtime.runtime import fetch_status
from agent_runtime.testing import ScriptedModel, wait_until

ROOT = Path(__file__).resolve().parents[2]


def served(path: Path) -> RuntimeConfig:
    return RuntimeConfig(
        memory=MemoryConfig(store="memory"), telemetry=TelemetryConfig(status_socket=str(path))
    )


@pytest.fixture(autouse=True)
def _logging_left_alone() -> Iterator[None]:
    """A runtime started here may configure structlog onto a captured stream: undo it."""
    yield
    structlog.reset_defaults()


class Host:
    """tests/agent_runtime/status_host.py in a subprocess: a lead that delegated to a
    researcher held in its tool, and an idle agent."""

    def __init__(self, path: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.path = path
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.agent_runtime.status_host", str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line == "ready\n", f"host did not start: {line!r} {self._stderr()}"

    def _stderr(self) -> str:
        if self.process.poll() is None:
            return ""
        assert self.process.stderr is not None
        return self.process.stderr.read()

    def finish(self) -> None:
        """Let the held tool go and wait for the host to stop its runtime and exit."""
        out, err = self.process.communicate(timeout=60)  # closes its stdin first
        assert self.process.returncode == 0, err
        assert out == "done\n"


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    running = Host(tmp_path / "status.sock")
    yield running
    if running.process.poll() is None:
        running.process.kill()
        running.process.wait(10)


def test_top_prints_the_tree_and_agents_of_a_runtime_in_another_process(
    host: Host, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["top", str(host.path), "--once"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("runtime status-host"))
    assert "agents 3  running 2" in header
    assert "    subagents (supervisor one_for_one) alive" in lines
    assert "      agent:ops/lead/0 (supervisor one_for_one) alive" in lines
    assert "        agent (worker) alive  running waiting on subagent" in lines
    assert "      agent:ops/researcher/0 (worker) alive  running tool:hold" in lines
    researcher = next(line for line in lines if line.startswith("  ops/researcher/0"))
    assert "running  tool:hold" in researcher and "parent=ops/lead/0" in researcher
    assert any(line.startswith("  ops/spare/0  idle  idle") for line in lines)
    host.finish()


def test_the_report_on_the_socket_is_the_hosts_tree_and_stats(host: Host) -> None:
    report = fetch_status(host.path)
    assert report.tree.runtime == report.stats.runtime == "status-host"
    researcher = report.tree.agent(("ops", "researcher", 0))
    assert researcher is not None and researcher.parent == AgentKey("ops", "lead", 0)
    assert (researcher.status, researcher.pending_tool_calls, researcher.turn) == ("running", 1, 1)
    assert report.stats.turns >= 2  # the lead's turn and the researcher's
    host.finish()


def test_top_ends_when_the_watched_runtime_stops(host: Host) -> None:
    out = io.StringIO()
    codes: list[int] = []
    watcher = threading.Thread(
        target=lambda: codes.append(run_top(str(host.path), interval=0.05, out=out))
    )
    watcher.start()
    wait_until(lambda: "tool:hold" in out.getvalue(), what="top printed a snapshot")
    host.finish()
    watcher.join(30)
    assert codes == [0]
    assert out.getvalue().endswith(f"runtime at {host.path} is gone\n")
    assert not host.path.exists()


def test_top_on_a_terminal_shows_a_live_view(host: Host) -> None:
    leader, follower = pty.openpty()
    command = [sys.executable, "-m", "agent_runtime.cli._main", "top", str(host.path), "-n", "2"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120", "LINES": "40"}
    process = subprocess.Popen(
        command, stdin=follower, stdout=follower, stderr=follower, env=env, close_fds=True
    )
    os.close(follower)
    screen = b""
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], 30)
            if not ready:
                break
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: top exited
                break
            if not chunk:
                break
            screen += chunk
    finally:
        os.close(leader)
        assert process.wait(30) == 0
    text = screen.decode(errors="replace")
    assert "\x1b[" in text  # drawn for a terminal, not as plain lines
    assert "└── agent (worker) alive" in text  # the transient lead's own supervisor
    assert "agent:ops/researcher/0 (worker) alive" in text and "tool:hold" in text
    assert "waiting on subagent" in text
    host.finish()


def test_top_without_a_runtime_says_nobody_serves_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nobody.sock"
    assert cli.main(["top", str(path), "--once"]) == 1
    err = capsys.readouterr().err
    assert f"no runtime serves {str(path)!r}" in err and "telemetry.status_socket" in err


def test_top_on_a_socket_that_is_not_a_runtimes_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "other.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as other:
        other.bind(str(path))
        other.listen(1)

        def answer() -> None:
            conn, _ = other.accept()
            with conn:
                conn.sendall(b"HTTP/1.0 200 OK\r\n\r\nhello")

        server = threading.Thread(target=answer)
        server.start()
        assert cli.main(["top", str(path), "--once"]) == 1
        server.join(10)
    err = capsys.readouterr().err
    assert f"cannot read a runtime status from {str(path)!r}" in err
    assert "did not answer with a runtime status report" in err


def test_top_rejects_a_poll_interval_that_is_not_positive(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["watch", "x.sock", "--interval", "0"])
    assert info.value.code == 2
    assert "invalid value '0' (expected > 0)" in capsys.readouterr().err


def test_top_without_a_path_names_the_config_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["top"]) == 2
    assert "telemetry.status_socket" in capsys.readouterr().err


def test_top_takes_the_path_from_the_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "from-config.sock"
    config = tmp_path / "runtime.toml"
    config.write_text(f'[telemetry]\nstatus_socket = "{path}"\n[memory]\nstore = "memory"\n')
    with Runtime.start(str(config), name="configured"):
        assert cli.main(["--config", str(config), "top", "--once"]) == 0
    lines = capsys.readouterr().out.splitlines()  # the runtime's own logs may be there too
    assert any(line.startswith("runtime configured  up ") for line in lines)


# -- the socket in this process -------------------------------------------------------------------


def test_the_socket_is_private_serves_the_tree_and_goes_with_the_runtime(tmp_path: Path) -> None:
    path = tmp_path / "run" / "status.sock"  # its directory is made
    with Runtime.start(served(path), name="here") as runtime:
        runtime.start_agent(("s", "main", 0), model=ScriptedModel(["a"]))
        mode = os.stat(path).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
        report = fetch_status(path)
        assert [a.key for a in report.tree.agents] == [AgentKey("s", "main", 0)]
        assert report.tree.root == runtime.tree().root
    assert not path.exists()


def test_a_path_served_by_a_live_runtime_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "status.sock"
    with Runtime.start(served(path), name="first"):
        with pytest.raises(ConfigError, match="served by another running runtime") as info:
            Runtime.start(served(path), name="second")
        assert "telemetry.status_socket" in str(info.value)
        assert fetch_status(path).tree.runtime == "first"  # still the first one's


def test_a_socket_left_behind_by_a_dead_process_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "status.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens
    with Runtime.start(served(path), name="fresh"):
        assert fetch_status(path).tree.runtime == "fresh"


def test_a_file_that_is_not_a_socket_is_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("keep me")
    with pytest.raises(ConfigError, match="exists and is not a socket"):
        Runtime.start(served(path))
    assert path.read_text() == "keep me"


def test_a_path_too_long_for_a_unix_socket_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / ("x" * 120)
    with pytest.raises(ConfigError, match="too long for a Unix socket"):
        Runtime.start(served(path))


def test_an_empty_status_socket_is_rejected_by_the_config() -> None:
    with pytest.raises(ValueError, match="status_socket"):
        TelemetryConfig(status_socket="")
