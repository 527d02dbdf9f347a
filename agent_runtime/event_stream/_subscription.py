"""Subscription: one reader's bounded window onto an agent's events, across runs."""

from __future__ import annotations

import collections
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from types import TracebackType

from agent_runtime._errors import StreamClosed, StreamOverflow
from agent_runtime._key import AgentKey
from agent_runtime._loop_guard import refuse_on_loop
from agent_runtime.abort import AbortSignal
from agent_runtime.event_stream._alarm import LoopAlarm
from agent_runtime.event_stream._stream import EventStream, OverflowPolicy
from agent_runtime.event_stream._until_abort import push_until_abort
from agent_runtime.events import Error, Event, is_terminal

OVERFLOW_REASON = "subscriber_overflow"
UNSUBSCRIBED = "unsubscribed"
# Events an async reader takes per turn of its loop: enough to amortise the stream's lock,
# few enough that a host serialising each one (an SSE server) still gives every other task
# of its loop a turn every few milliseconds.
ASYNC_BATCH = 32


class Subscription:
    """A bounded buffer of an agent's events, filled by the agent, read by one consumer.

    - `overflow="block"`: the agent's run waits for this reader (backpressure) up to
      `block_timeout`; past that the subscription alone is closed and its reader gets
      `StreamOverflow` after the buffered events. `"drop_oldest"`/`"drop_newest"`: the run
      never waits; `EventsDropped(n)` marks each gap. `"error"`: closed at once when full.
    - A run's terminal (`AgentEnd`, `Error`, `Canceled`, a subagent's too) is never dropped,
      evicted or waited for: it takes no buffer space, so every policy accepts it at once and
      `until_end()` returns once the reader gets to it; an `EventsDropped` marker before it
      counts the events overflow dropped just before it. Only a subscription already closed
      (by `close()`, or by overflow under `"block"`/`"error"`) misses later terminals, and
      its reader gets that end (`StreamOverflow` for overflow) instead of waiting.
    - Iterating yields events of every run (and of delegated subagents, tagged with their
      key) until `close()`; `until_end()` stops after the end of the next run of `agent`.
    - `close()` (or leaving the `with` block, or dropping the object) unsubscribes; a closed
      subscription costs the agent nothing.
    """

    def __init__(
        self,
        agent: AgentKey | None,
        *,
        max_queue: int = 1000,
        overflow: OverflowPolicy = "block",
        block_timeout: float = 30.0,
        on_close: Callable[[Subscription], None] | None = None,
    ) -> None:
        if not block_timeout > 0:
            raise ValueError(f"invalid block_timeout {block_timeout!r} (expected seconds > 0)")
        self.agent = agent
        self.overflow = overflow
        self.block_timeout = block_timeout
        self.stream = EventStream(
            max_queue=max_queue, overflow=overflow, agent=agent, multi_run=True
        )
        self._on_close = on_close
        self._buffer: collections.deque[Event] = collections.deque()
        self._finished = False

    @property
    def closed(self) -> bool:
        """True once unsubscribed or closed by overflow (buffered events may remain)."""
        return self.stream.done

    def close(self) -> None:
        """Unsubscribe; a reader blocked in iteration stops after the buffered events."""
        if self.stream.cancel(UNSUBSCRIBED) and self._on_close is not None:
            self._on_close(self)

    def fail(self, reason: str) -> None:
        """Close because this reader fell behind; the reader sees `StreamOverflow`."""
        if self.stream.error(f"{OVERFLOW_REASON}: {reason}") and self._on_close is not None:
            self._on_close(self)

    def _check_end(self, event: Event) -> None:
        if isinstance(event, Error) and event.reason.startswith(OVERFLOW_REASON):
            raise StreamOverflow(f"subscription closed: {event.reason}")

    def _next(self, deadline: float | None) -> Event | None:
        """The next event (the stream's own terminal marks the end); None on timeout."""
        if self._buffer:
            return self._buffer.popleft()
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            batch = self.stream.pull_many(256, timeout=left)
            if batch:
                self._buffer.extend(batch[1:])
                return batch[0]
            if self._finished:
                return None
            if left is not None and left <= 0:
                return None

    def _read(self, deadline: float | None, what: str, instead: str) -> Iterator[Event]:
        refuse_on_loop(what, instead)
        while not self._finished:
            event = self._next(deadline)
            if event is None:
                if self._finished:
                    return
                raise TimeoutError("no event within the timeout")
            if event is self.stream.terminal:
                self._finished = True
                self._check_end(event)
                return
            yield event

    def __iter__(self) -> Iterator[Event]:
        """Events until the subscription is closed.

        Raises:
            StreamOverflow: the subscription was closed because this reader fell behind.
            RuntimeError: iterated on the runtime's event-loop thread, where waiting would
                freeze every agent (use `async for`).
        """
        yield from self._read(None, "iterating a Subscription", "`async for event in sub`")

    async def __aiter__(self) -> AsyncIterator[Event]:
        """`__iter__` for asyncio: waiting never blocks the event loop, and events are taken
        in batches, with one turn of the loop between batches that were ready at once.

        Raises:
            StreamOverflow: as `__iter__`.
        """
        while (event := await self._anext(None)) is not None:
            yield event

    async def auntil_end(
        self, timeout: float | None = None, *, run_id: str | None = None
    ) -> AsyncIterator[Event]:
        """`until_end` for asyncio (`async for event in sub.auntil_end(...)`): the same
        events and errors; waiting never blocks the event loop.

        Raises:
            TimeoutError, StreamOverflow: as `until_end`.
        """
        alarm = None if timeout is None else LoopAlarm(time.monotonic() + timeout)
        try:
            while (event := await self._anext(alarm)) is not None:
                yield event
                if self._ends_run(event, run_id):
                    return
        finally:
            if alarm is not None:
                alarm.cancel()
        if not self._finished:
            raise TimeoutError("no event within the timeout")

    async def _anext(self, alarm: LoopAlarm | None) -> Event | None:
        """The next event for an async reader; None at the end or on timeout (`alarm`'s
        deadline; then not `_finished`). Raises StreamOverflow at an overflow's end, after the
        buffered events."""
        if self._finished:
            return None
        if not self._buffer:
            if alarm is None:
                batch = await self.stream.apull_many(ASYNC_BATCH)
            else:
                batch = await self.stream._apull_until(ASYNC_BATCH, alarm)
            if not batch:
                return None
            self._buffer.extend(batch)
        event = self._buffer.popleft()
        if event is self.stream.terminal:
            self._finished = True
            self._check_end(event)
            return None
        return event

    def until_end(
        self, timeout: float | None = None, *, run_id: str | None = None
    ) -> Iterator[Event]:
        """Events up to and including the end (`AgentEnd`, `Error`, `Canceled`) of the next run
        of this subscription's agent (or of run `run_id`); events after it stay buffered for
        the next read.

        Raises:
            TimeoutError: the run did not end within `timeout` seconds.
            StreamOverflow: the subscription was closed because this reader fell behind.
            RuntimeError: iterated on the runtime's event-loop thread, where waiting would
                freeze every agent (use `auntil_end`).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        reading = self._read(
            deadline, "Subscription.until_end()", "`async for event in sub.auntil_end(...)`"
        )
        for event in reading:
            yield event
            if self._ends_run(event, run_id):
                return

    def _ends_run(self, event: Event, run_id: str | None) -> bool:
        if not is_terminal(event):
            return False
        if run_id is not None:  # a run id is unique: a delegate's run ends its read too
            return event.run_id == run_id
        return self.agent is None or event.agent == self.agent

    def __enter__(self) -> Subscription:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        # A forgotten subscription must not keep a blocked run waiting on it.
        stream = getattr(self, "stream", None)
        if stream is not None:
            stream.cancel(UNSUBSCRIBED)

    def __repr__(self) -> str:
        return f"<Subscription agent={self.agent} overflow={self.overflow} closed={self.closed}>"


def deliver_now(
    ref: weakref.ref[Subscription], event: Event, terminal: bool | None = None
) -> bool | None:
    """`deliver` without waiting: the same outcome, or None when a `block` subscription is
    full (nothing queued: `await deliver(ref, event)` then waits for its reader). `terminal`:
    `is_terminal(event)`, from a caller that delivers one checked event to many."""
    sub = ref()
    if sub is None:
        return False
    stream, overflow = sub.stream, sub.overflow
    del sub
    if terminal is False and overflow == "block":  # every delta: the one-call path
        return stream.offer_data(event)
    if stream.done:
        return False
    try:
        if overflow == "block":
            accepted = (
                stream.offer(event) if terminal is None else stream.offer_known(event, terminal)
            )
            if accepted is None:
                return None
        elif overflow == "error":
            stream.push(event, timeout=0)
        else:
            stream.push_async(event)
    except StreamOverflow:
        _overflowed(ref, stream, overflow)
        return False
    except StreamClosed:  # closed concurrently
        return False
    return True


def deliver_many(
    ref: weakref.ref[Subscription], stream: EventStream, events: Sequence[Event]
) -> bool:
    """`deliver_now` of each of `events` (none a run's terminal) in one go, to the
    subscription behind `ref` whose buffer is `stream`: a `block` subscription must have room
    for them all (`stream.room()`). False once the subscription is closed or gone."""
    try:
        return stream.offer_many(events)
    except StreamOverflow:  # "error": closed at once when full
        _overflowed(ref, stream, "error")
        return False
    except StreamClosed:  # closed concurrently
        return False


async def deliver(
    ref: weakref.ref[Subscription], event: Event, until: AbortSignal | None = None
) -> bool:
    """Hand `event` to the subscription behind `ref` per its policy (on the runtime's loop).

    Only the buffer is held while a `block` delivery waits: a subscription its reader drops
    meanwhile is collected, which closes the buffer and ends the wait at once. A run's terminal
    never waits and never overflows (it takes no buffer space). Returns False once the
    subscription is closed or gone (the agent's next `subscription_refs` prunes it), or
    when the event was not queued.

    With `until` (the run's signal), an abort ends a wait for the reader, or spares it: the
    event is dropped for that subscription, counted in its `stats().dropped` and announced
    to its reader by an `EventsDropped` marker before the next event it gets (the run's
    terminal, which never waits). An aborted run ends without waiting for a stalled reader.
    """
    done = deliver_now(ref, event)
    if done is not None:
        return done
    sub = ref()
    if sub is None:
        return False
    stream, overflow, block_timeout = sub.stream, sub.overflow, sub.block_timeout
    del sub
    try:  # full: wait for the reader, up to block_timeout (or an abort)
        if until is None:
            await stream.apush(event, timeout=block_timeout)
        else:
            return await push_until_abort(stream, event, block_timeout, until)
    except StreamOverflow:
        _overflowed(ref, stream, overflow)
        return False
    except StreamClosed:  # closed concurrently
        return False
    return True


def _overflowed(ref: weakref.ref[Subscription], stream: EventStream, overflow: str) -> None:
    why = f"reader did not keep up ({stream.max_queue} events buffered, overflow={overflow!r})"
    sub = ref()
    if sub is not None:
        sub.fail(why)
    else:
        stream.error(f"{OVERFLOW_REASON}: {why}")
