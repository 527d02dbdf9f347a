"""One SSE response over a replay buffer: resume after `Last-Event-ID`, gaps reported.

A reader that last saw id L gets L+1, L+2, ... in order; when some of those fell out of the
buffer it first gets an `events_dropped` frame counting them (its id is the last one lost, so
a reconnect after it does not report the same gap again). `last_event_id` missing: only what
comes from now on. An idle stream gets a `: keepalive` comment every `keepalive` seconds (so
proxies keep it open and a gone client is noticed). When the buffer closes the response ends
after the frames kept.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import StreamingResponse

from agent_runtime._key import AgentKey
from agent_runtime.event_stream._alarm import LoopAlarm
from agent_runtime.server._guard import MAX_EVENT_ID_CHARS
from agent_runtime.server._replay import ReplayBuffer
from agent_runtime.server._wire import Frame, dropped_frame

RETRY_MS = 1000
KEEPALIVE = b": keepalive\n\n"


def last_event_id(request: Request) -> int | None:
    """The id a client last saw: the `Last-Event-ID` header (what EventSource sends when it
    reconnects), else the `last_event_id` query parameter (for a page opening a stream
    anew); None when neither is a non-negative integer of at most `MAX_EVENT_ID_CHARS`
    digits (`_guard` answers a longer one 400 first; this bound holds wherever the stream is
    served, so no id reaches `int()` past its digit limit)."""
    raw = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
    if raw is None:
        return None
    raw = raw.strip()
    if len(raw) > MAX_EVENT_ID_CHARS or not raw.isdigit():
        return None
    return int(raw)


async def frames(
    buffer: ReplayBuffer[Frame],
    last_seen: int | None,
    agent: AgentKey | None,
    keepalive: float,
) -> AsyncIterator[bytes]:
    """The bytes of one SSE response (see the module docstring)."""
    cursor = buffer.last_id if last_seen is None else last_seen
    buffer.readers += 1
    idle = LoopAlarm(time.monotonic() + keepalive)  # one timer for every wait of this reader
    try:
        yield f"retry: {RETRY_MS}\n\n".encode()
        while True:
            window = buffer.after(cursor)
            chunk = bytearray()
            if window.dropped:
                chunk += b"id: %d\n" % (window.first_id - 1)
                chunk += dropped_frame(window.dropped, agent)
            for event_id, frame in window.frames:
                chunk += b"id: %d\n" % event_id
                chunk += frame.body()
            cursor = window.frames[-1][0] if window.frames else window.first_id - 1
            if chunk:
                yield bytes(chunk)
                continue
            if buffer.closed:
                return
            idle.deadline = time.monotonic() + keepalive  # each wait's keepalive, as it starts
            if not await buffer.wait(cursor, idle):
                yield KEEPALIVE
    finally:
        idle.cancel()
        buffer.readers -= 1


def sse_response(
    request: Request, buffer: ReplayBuffer[Frame], agent: AgentKey | None, keepalive: float
) -> StreamingResponse:
    """The SSE response of `buffer` for `request` (resumed from its last event id)."""
    return StreamingResponse(
        frames(buffer, last_event_id(request), agent, keepalive),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
