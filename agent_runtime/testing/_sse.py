"""Server-sent-event framing for the mock server's wire formats."""

from __future__ import annotations

import json
from typing import Any


def sse_frame(event: Any, name: str | None = None) -> bytes:
    """One SSE frame: a str payload as is, anything else as JSON; `name` adds an event line.

    A tuple `(name, payload)` is accepted in place of `event` too.
    """
    if isinstance(event, tuple):
        name, event = event
    data = event if isinstance(event, str) else json.dumps(event)
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {data}\n\n".encode()
