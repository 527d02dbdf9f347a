"""The status socket (`telemetry.status_socket`): a runtime's tree and stats on a Unix socket.

The protocol is one document per connection: the server writes a `StatusReport` as one line
of JSON and closes; it reads nothing from its clients. So `agent-runtime top` (which polls
it with `fetch_status`) or `nc -U PATH` in a shell gets a fresh snapshot per connection.

Guarantees:
- The socket file is made readable and writable by its owner only (it names sessions).
- A runtime never takes a path from another live runtime, and never replaces a file that is
  not a socket; a socket left behind by a process that died is replaced.
- One daemon thread serves the connections, one at a time, each bounded by `SEND_TIMEOUT`:
  a client that stops reading holds nothing of the runtime but that thread, for so long.
- `close()` stops the thread and removes the socket file (if it is still this server's).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import stat
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from agent_runtime._errors import ConfigError
from agent_runtime.runtime._introspection import StatusReport
from supervisors._log import get_logger

log = get_logger(__name__)

KEY = "telemetry.status_socket"
SEND_TIMEOUT = 2.0  # seconds one client may take to read one report
MAX_REPORT_BYTES = 64 * 1024 * 1024  # what a client reads at most (a runtime's report is far less)
# sockaddr_un.sun_path holds 108 bytes on Linux (104 on macOS), the final NUL included.
MAX_PATH_BYTES = 103 if sys.platform == "darwin" else 107


class StatusSocket:
    """A bound status socket; `serve` starts answering, `close` ends it (idempotent)."""

    def __init__(self, path: Path, listener: socket.socket) -> None:
        self.path = path
        self._listener = listener
        self._inode = os.stat(path).st_ino
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread: threading.Thread | None = None
        self._closed = False

    @classmethod
    def bind(cls, path: str | os.PathLike[str]) -> StatusSocket:
        """Bind the socket at `path` (its directory is created if missing).

        Raises:
            ConfigError: the path is too long for a Unix socket, is served by another live
                runtime, is a file that is not a socket, or cannot be bound; names the key,
                the path and the problem.
        """
        where = Path(path)
        size = len(os.fsencode(where))
        if size > MAX_PATH_BYTES:
            raise ConfigError(
                f"{KEY} {str(path)!r} is too long for a Unix socket ({size} bytes; at most "
                f"{MAX_PATH_BYTES}): use a shorter path"
            )
        try:
            where.parent.mkdir(parents=True, exist_ok=True)
            _clear_stale(where)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError as exc:
            raise ConfigError(f"{KEY} {str(path)!r} cannot be served: {exc}") from exc
        try:
            listener.bind(str(where))
            os.chmod(where, 0o600)
            listener.listen(16)
            listener.setblocking(False)
            return cls(where, listener)
        except OSError as exc:
            listener.close()
            raise ConfigError(f"{KEY} {str(path)!r} cannot be served: {exc}") from exc

    def serve(self, report: Callable[[], StatusReport], *, name: str) -> None:
        """Answer each connection with `report()` as JSON, on a daemon thread `name`."""
        self._thread = threading.Thread(target=self._serve, args=(report,), name=name, daemon=True)
        self._thread.start()

    def _serve(self, report: Callable[[], StatusReport]) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while True:
                for key, _ in selector.select():
                    if key.fileobj is self._wake_r:
                        return
                    self._answer(report)

    def _answer(self, report: Callable[[], StatusReport]) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError:  # the client gave up meanwhile
            return
        with conn:
            try:
                data = report().model_dump_json().encode() + b"\n"
                conn.settimeout(SEND_TIMEOUT)
                conn.sendall(data)
            except OSError as exc:  # the client went away or stopped reading
                log.debug("runtime.status_socket.send_failed", error=str(exc))
            except Exception:  # a bug in the snapshot: the server goes on
                log.exception("runtime.status_socket.report_failed")

    def close(self, timeout: float = 5.0) -> None:
        """Stop serving and remove the socket file, unless another server took the path."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._thread is not None:
            self._thread.join(timeout)
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)


def _clear_stale(path: Path) -> None:
    """Remove a socket at `path` that nobody serves; refuse any other file or a live one."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ConfigError(f"{KEY} {str(path)!r} exists and is not a socket: it is not replaced")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):  # left behind by a process gone
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    except OSError:
        pass  # busy (a full backlog, a timeout): someone serves it
    finally:
        probe.close()
    raise ConfigError(f"{KEY} {str(path)!r} is served by another running runtime")


def fetch_status(path: str | os.PathLike[str], timeout: float = 5.0) -> StatusReport:
    """Read one `StatusReport` from the status socket at `path`.

    Raises:
        OSError: nobody serves `path` (FileNotFoundError, ConnectionRefusedError), or it did
            not answer within `timeout` seconds (TimeoutError).
        ValueError: what came back is not a runtime's status report (or is larger than
            `MAX_REPORT_BYTES`).
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout)
        client.connect(os.fspath(path))
        chunks, size = [], 0
        while chunk := client.recv(65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_REPORT_BYTES:
                raise ValueError(
                    f"{os.fspath(path)!r} sent more than {MAX_REPORT_BYTES} bytes: "
                    "not a runtime status report"
                )
    data = b"".join(chunks)
    try:
        return StatusReport.model_validate_json(data)
    except ValueError as exc:
        raise ValueError(
            f"{os.fspath(path)!r} did not answer with a runtime status report "
            f"({len(data)} bytes): {str(exc).splitlines()[0]}"
        ) from None
