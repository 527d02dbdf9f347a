"""A `block` push that an abort ends: an aborted run does not wait for a stalled reader."""

from __future__ import annotations

import asyncio

from agent_runtime.abort import AbortSignal
from agent_runtime.event_stream._stream import EventStream
from agent_runtime.events import Event


async def push_until_abort(
    stream: EventStream, event: Event, timeout: float | None, signal: AbortSignal
) -> bool:
    """`stream.apush(event, timeout=timeout)` while `signal` is not aborted; once it is (or
    if it already was) and the stream is full, `event` is dropped instead: counted in
    `stats().dropped` and announced to the reader by an `EventsDropped` marker before the
    next event it gets (the run's terminal, which never waits). True when it was queued.

    Raises:
        StreamOverflow, StreamClosed: as `apush`.
    """
    if not signal.aborted:
        accepted = stream.offer(event)  # the common case, room: no task
        if accepted is not None:
            return accepted
        if await _pushed_unless_aborted(stream, event, timeout, signal):
            return True
    return stream.push_async(event)


async def _pushed_unless_aborted(
    stream: EventStream, event: Event, timeout: float | None, signal: AbortSignal
) -> bool:
    """`apush`, given up if `signal` aborts first: False then (nothing queued)."""
    push = asyncio.ensure_future(stream.apush(event, timeout=timeout))
    aborted = asyncio.ensure_future(signal.wait_async())
    try:
        await asyncio.wait((push, aborted), return_when=asyncio.FIRST_COMPLETED)
    finally:
        aborted.cancel()
        push.cancel()  # a no-op once it is done
        await asyncio.wait((push,))  # its own cleanup (the count of waiting pushers) first
    return not push.cancelled() and push.result()
