"""The bounded event stream of a run and the bounded subscriptions to an agent's events.

`EventStream` is the mailbox of one run (FIFO events, then exactly one terminal);
`Subscription` is one reader's bounded buffer of an agent's events (DESIGN.md 6).
"""

from agent_runtime.event_stream._gap_queue import StreamStats
from agent_runtime.event_stream._stream import (
    EventStream,
    OverflowPolicy,
    RunCanceled,
    RunFailed,
    StreamClosed,
    StreamOverflow,
)
from agent_runtime.event_stream._subscription import Subscription

__all__ = [
    "EventStream",
    "OverflowPolicy",
    "RunCanceled",
    "RunFailed",
    "StreamClosed",
    "StreamOverflow",
    "StreamStats",
    "Subscription",
]
