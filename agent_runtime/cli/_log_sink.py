"""LogSink: the runtime's log lines, shown in the demo's event log instead of on stderr."""

from __future__ import annotations

import io
import json
import threading

from agent_runtime.cli._journal import Journal


class LogSink(io.StringIO):
    """Where the runtime's log lines go during the demo: the event log (JSON lines, shown as
    `level event key=value`), so nothing is written over the live view."""

    def __init__(self, journal: Journal) -> None:
        super().__init__()
        self._journal = journal
        self._lock = threading.Lock()
        self._partial = ""

    def write(self, text: str) -> int:
        with self._lock:
            self._partial += text
            *complete, self._partial = self._partial.split("\n")
        for line in complete:
            if line.strip():
                self._journal.note(_log_text(line), style="dim red", who="runtime")
        return len(text)


def _log_text(line: str) -> str:
    try:
        record = json.loads(line)
    except ValueError:
        return f"log: {line}"
    if not isinstance(record, dict):
        return f"log: {line}"
    level, event = record.pop("level", "log"), record.pop("event", "")
    record.pop("timestamp", None)
    facts = " ".join(f"{k}={v}" for k, v in record.items())
    return f"log {level} {event} {facts}".rstrip()
