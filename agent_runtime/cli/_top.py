"""`agent-runtime top`: a live view of a runtime in another process, through its status socket.

The runtime must run with `telemetry.status_socket = PATH`; `top` polls that socket (one
snapshot per connection) every `interval` seconds. On a terminal the view redraws in place
(rich `Live`); otherwise each poll prints plain lines, ending with a blank line.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from rich.console import Console
from rich.live import Live

from agent_runtime.cli._status_view import render_status, status_lines
from agent_runtime.runtime import StatusReport, fetch_status


class Unreachable(Exception):
    """The status socket did not answer with a report (the message says why)."""


def read_report(path: str) -> StatusReport:
    """One report from `path`.

    Raises:
        Unreachable: nobody serves `path`, it timed out, or it is not a status socket.
    """
    try:
        return fetch_status(path)
    except FileNotFoundError:
        raise Unreachable(
            f"no runtime serves {path!r}: no such socket (start the runtime with "
            f"telemetry.status_socket = {path!r})"
        ) from None
    except ConnectionRefusedError:
        raise Unreachable(f"no runtime serves {path!r} (connection refused)") from None
    except (OSError, ValueError) as exc:
        raise Unreachable(f"cannot read a runtime status from {path!r}: {exc}") from None


def run_top(
    path: str,
    *,
    interval: float = 1.0,
    count: int | None = None,
    console: Console | None = None,
    out: TextIO | None = None,
) -> int:
    """Watch the runtime serving `path` for `count` polls (None: until it stops or Ctrl-C).

    Uses a live view when `console` is a terminal, else prints plain lines to `out`
    (stdout). Returns 0 when it watched until the end, 1 if the first poll got no report.
    """
    console = console or Console()
    out = out or sys.stdout
    try:
        report = read_report(path)
    except Unreachable as exc:
        print(f"agent-runtime top: {exc}", file=sys.stderr)
        return 1
    try:
        if console.is_terminal:
            _watch_live(path, report, interval, count, console)
        else:
            _watch_plain(path, report, interval, count, out)
    except KeyboardInterrupt:
        pass
    return 0


def _poll(path: str, interval: float) -> StatusReport | None:
    """Wait `interval`, then the next report; None once the runtime is gone."""
    time.sleep(interval)  # the poll period, not a synchronisation
    try:
        return read_report(path)
    except Unreachable:
        return None


def _watch_live(
    path: str, report: StatusReport, interval: float, count: int | None, console: Console
) -> None:
    with Live(render_status(report), console=console, auto_refresh=False) as live:
        live.refresh()
        seen = 1
        while count is None or seen < count:
            polled = _poll(path, interval)
            if polled is None:
                console.print(f"[bold red]runtime at {path} is gone[/]")
                return
            live.update(render_status(polled), refresh=True)
            seen += 1


def _watch_plain(
    path: str, report: StatusReport, interval: float, count: int | None, out: TextIO
) -> None:
    seen = 0
    while True:
        out.write("\n".join(status_lines(report)) + "\n\n")
        out.flush()
        seen += 1
        if count is not None and seen >= count:
            return
        polled = _poll(path, interval)
        if polled is None:
            out.write(f"runtime at {path} is gone\n")
            out.flush()
            return
        report = polled
