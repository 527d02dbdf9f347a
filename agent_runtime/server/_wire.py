"""How an event travels in an SSE frame: `event: <type>` and `data: <the event's JSON>`.

Every event is its `model_dump_json()` (it parses back with `EventAdapter`), except
`message_update`, which carries its `delta` but not its growing `message`: that is in the
`message_start` before it and the `message_end` after it. Serialising the snapshot with every
token would make an answer cost O(length^2) on the wire and on the server; the delta alone
is O(1) per token and never builds the message.
"""

from __future__ import annotations

import json

from agent_runtime._key import AgentKey
from agent_runtime.events import Event, EventsDropped, MessageUpdate


def frame_body(event_type: str, data_json: str) -> bytes:
    """The body of one SSE frame (everything but its `id:` line)."""
    return f"event: {event_type}\ndata: {data_json}\n\n".encode()


def event_frame(event: Event) -> bytes:
    """The frame body of `event` (see the module docstring for `message_update`)."""
    if isinstance(event, MessageUpdate):
        fields = event.__dict__  # not `.message`: reading it would build the snapshot
        agent = fields["agent"]
        data = {
            "agent": None if agent is None else list(agent),
            "run_id": fields["run_id"],
            "seq": fields["seq"],
            "ts": fields["ts"],
            "type": "message_update",
            "delta": fields["delta"].model_dump(mode="json"),
        }
        return frame_body("message_update", json.dumps(data, separators=(",", ":")))
    return frame_body(event.type, event.model_dump_json())


def dropped_frame(count: int, agent: AgentKey | None) -> bytes:
    """The frame body of an `events_dropped` marker: `count` events this reader lost."""
    return event_frame(EventsDropped(count=count, agent=agent))


def end_frame(reason: str) -> bytes:
    """The last frame of an agent's stream once the agent stopped (`stream_end`)."""
    return frame_body("stream_end", json.dumps({"reason": reason}))
