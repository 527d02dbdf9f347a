"""A throwaway PostgreSQL server for the PostgresStore tests, started and stopped by the tests.

Debian's `postgresql` package puts its binaries in /usr/lib/postgresql/<version>/bin, off
PATH. `initdb` refuses to run as root, so as root the server runs as the `postgres` user
(`runuser -u postgres --`) in a temporary directory it owns; otherwise as the current user.
It listens on a free port of 127.0.0.1 only (and a Unix socket in its own directory), with
password authentication over TCP, and without fsync (its data is thrown away).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

INSTALL = "apt-get install -y postgresql"


def bin_dir() -> Path | None:
    """The directory of the newest PostgreSQL server binaries found, or None."""

    def version(path: str) -> tuple[int, ...]:
        return tuple(int(n) for n in re.findall(r"\d+", path))

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=version)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def unavailable() -> str | None:
    """Why the server cannot be started here (a skip reason naming the fix), or None."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg 3 is not installed: pip install -e '.[postgres]'"
    if bin_dir() is None:
        return (
            "PostgreSQL server binaries not found in /usr/lib/postgresql/*/bin or on PATH: "
            f"install them with `{INSTALL}` (.ci/run does) to run the PostgresStore tests"
        )
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return f"running as root without a `postgres` user to run the server: `{INSTALL}`"
    return None


@dataclass(frozen=True)
class Server:
    """A running server: superuser `postgres` with `password` on 127.0.0.1:`port`."""

    port: int
    password: str
    pid: int

    def dsn(self, *, dbname: str = "postgres", password: str | None = None, **params: str) -> str:
        """A URI to the server (with this server's password unless another is given)."""
        secret = self.password if password is None else password
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return f"postgresql://postgres:{secret}@127.0.0.1:{self.port}/{dbname}" + (
            f"?{query}" if query else ""
        )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _gone(pid: int) -> bool:
    """Whether process `pid` has exited (a zombie, waiting for its reaper, has)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state in ("Z", "X")
    return False


def _stop(pid: int, timeout: float = 30.0) -> None:
    """Stop the server by its PID: fast shutdown (SIGINT), then SIGKILL after `timeout`."""
    for sig, wait in ((signal.SIGINT, timeout), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if _gone(pid):
                return
            time.sleep(0.05)


@contextlib.contextmanager
def running() -> Iterator[Server]:
    """Start a server in a new temporary directory; stop it and remove the directory on exit,
    also when starting it or the body failed.

    Raises:
        RuntimeError: initdb or pg_ctl failed (with their output and the server log).
    """
    binaries = bin_dir()
    assert binaries is not None, unavailable()
    base = Path(tempfile.mkdtemp(prefix="agent-runtime-pg-"))
    data, log, pwfile = base / "data", base / "server.log", base / "password"
    password = "pw-" + secrets.token_hex(8)
    pwfile.write_text(password)
    prefix: list[str] = []
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        for path in (base, pwfile):
            os.chown(path, owner.pw_uid, owner.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    pid: int | None = None
    try:
        _run(
            [
                *prefix,
                str(binaries / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                f"--pwfile={pwfile}",
                "--auth-host=scram-sha-256",
                "--auth-local=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "-N",
            ]
        )
        for attempt in range(3):  # another process may take the free port before the server
            port = _free_port()
            options = (
                f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off"
            )
            pg_ctl = [str(binaries / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60"]
            started = subprocess.run(
                [*prefix, *pg_ctl, "-o", options, "start"],
                capture_output=True,
                text=True,
                timeout=90,
                stdin=subprocess.DEVNULL,
            )
            pid = _postmaster_pid(data)
            if started.returncode == 0 and pid is not None:
                break
            if pid is not None:
                _stop(pid)
                pid = None
            if attempt == 2:
                raise RuntimeError(
                    f"pg_ctl start failed: {started.stdout}{started.stderr}\n"
                    f"{log.read_text() if log.exists() else ''}"
                )
        assert pid is not None
        yield Server(port=port, password=password, pid=pid)
    finally:
        if pid is None:
            pid = _postmaster_pid(data)
        if pid is not None:
            _stop(pid)
        shutil.rmtree(base, ignore_errors=True)


def _postmaster_pid(data: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int((data / "postmaster.pid").read_text().split()[0])
    return None


def _run(command: list[str]) -> None:
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} failed ({done.returncode}): {done.stdout}{done.stderr}"
        )
