"""How an event travels in an SSE frame: `event: <type>` and `data: <the event's JSON>`.

Every event is its `model_dump_json()` (it parses back with `EventAdapter`), except
`message_update`, which carries its `delta` but not its growing `message`: that is in the
`message_start` before it and the `message_end` after it. Serialising the snapshot with every
token would make an answer cost O(length^2) on the wire and on the server; the delta alone
is O(1) per token and never builds the message.

A `Frame` is encoded once, however many readers (and streams: an agent's and its session's
share it) read it. The gateway's hub encodes it when it keeps it, since its length counts
against the replay buffers' byte budget (`[server] replay_max_bytes`); the message itself is
never built for it.
"""

from __future__ import annotations

import json
from typing import Any

from agent_runtime._key import AgentKey
from agent_runtime.events import Event, EventsDropped, MessageUpdate


def frame_body(event_type: str, data_json: str) -> bytes:
    """The body of one SSE frame (everything but its `id:` line)."""
    return f"event: {event_type}\ndata: {data_json}\n\n".encode()


class Frame:
    """One event of a stream, encoded on first use (`body()`), then kept as bytes only.

    A `message_update` keeps its identity and delta, never the event (whose message a
    reader elsewhere may build: the buffer must not hold a snapshot per token)."""

    __slots__ = ("_body", "_source")

    def __init__(self, source: Event | tuple[Any, ...] | None, body: bytes | None = None):
        self._source = source
        self._body = body

    @classmethod
    def of(cls, event: Event) -> Frame:
        """The frame of `event`."""
        if isinstance(event, MessageUpdate):
            fields = event.__dict__  # not `.message`: reading it would build the snapshot
            return cls(
                (fields["agent"], fields["run_id"], fields["seq"], fields["ts"], fields["delta"])
            )
        return cls(event)

    @classmethod
    def raw(cls, body: bytes) -> Frame:
        """A frame of given bytes."""
        return cls(None, body)

    def body(self) -> bytes:
        """The SSE frame's bytes, but its `id:` line."""
        if self._body is None:
            self._body = _encode(self._source)
            self._source = None
        return self._body


def _encode(source: Event | tuple[Any, ...] | None) -> bytes:
    if isinstance(source, tuple):
        agent, run_id, seq, ts, delta = source
        data = {
            "agent": None if agent is None else list(agent),
            "run_id": run_id,
            "seq": seq,
            "ts": ts,
            "type": "message_update",
            "delta": delta.model_dump(mode="json"),
        }
        return frame_body("message_update", json.dumps(data, separators=(",", ":")))
    assert source is not None
    return frame_body(source.type, source.model_dump_json())


def dropped_frame(count: int, agent: AgentKey | None) -> bytes:
    """The frame body of an `events_dropped` marker: `count` events this reader lost."""
    marker = EventsDropped(count=count, agent=agent)
    return frame_body(marker.type, marker.model_dump_json())


def end_frame(reason: str) -> Frame:
    """The last frame of an agent's stream once the agent stopped (`stream_end`)."""
    return Frame.raw(frame_body("stream_end", json.dumps({"reason": reason})))
