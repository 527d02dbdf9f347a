"""EventStream: the bounded, thread-safe mailbox of one run's events, ending in one terminal.

Producers push events (from threads or asyncio); readers iterate (sync or async) and see the
accepted events in FIFO order, an `EventsDropped` marker wherever overflow made a gap, and then the
single terminal event (`AgentEnd`, `Error` or `Canceled`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args

from agent_runtime._errors import (
    RunCanceled,
    RunFailed,
    StreamClosed,
    StreamOverflow,
    run_failed,
)
from agent_runtime._key import AgentKey
from agent_runtime._wakeup import AsyncWaiters
from agent_runtime.event_stream._alarm import LoopAlarm
from agent_runtime.event_stream._counted import CountedCondition
from agent_runtime.event_stream._deferred_wakes import wake_after_step
from agent_runtime.event_stream._gap_queue import GapQueue, StreamStats
from agent_runtime.event_stream._timers import deadline_after, remaining
from agent_runtime.event_stream._watchdog import Watchdog
from agent_runtime.events import (
    EVENT_TYPES,
    AgentEnd,
    Canceled,
    Error,
    Event,
    EventsDropped,
    Terminal,
    is_terminal,
)
from agent_runtime.messages import AssistantMessage, Message
from supervisors._log import get_logger

if TYPE_CHECKING:
    import pykka

__all__ = [
    "EventStream",
    "OverflowPolicy",
    "RunCanceled",
    "RunFailed",
    "StreamClosed",
    "StreamOverflow",
    "StreamStats",
]

OverflowPolicy = Literal["error", "drop_oldest", "drop_newest", "block"]
"""What `push` does when the queue is full (see `EventStream`)."""

_POLICIES: tuple[str, ...] = get_args(OverflowPolicy)

log = get_logger(__name__)

EndCallback = Callable[[Terminal], object]
"""Receives the stream's terminal event once the stream has ended (see `EventStream.on_end`)."""

_EVENT_CLASS_SET = frozenset(EVENT_TYPES)


class _DroppedAtEnd:
    """`on_end_dropped`'s callback: the queue's drop count at the end, handed on."""

    __slots__ = ("callback", "queue")

    def __init__(self, queue: GapQueue[Event], callback: Callable[[int], object]) -> None:
        self.queue, self.callback = queue, callback

    def __call__(self, _terminal: Terminal) -> None:
        # Read unlocked: once the stream has ended nothing is pushed, so nothing is dropped.
        self.callback(self.queue.dropped)


def _check_event(event: object, method: str) -> None:
    """Raise a TypeError naming the accepted types unless `event` is an `Event`.

    The exact-type lookup comes first: it costs a hash, where `isinstance` on a tuple of
    pydantic classes costs a microsecond per push."""
    if type(event) not in _EVENT_CLASS_SET and not isinstance(event, EVENT_TYPES):
        expected = ", ".join(cls.__name__ for cls in EVENT_TYPES)
        raise TypeError(
            f"EventStream.{method}() takes an event ({expected}; wrap your own data in"
            f" CustomEvent(name, data)), not {type(event).__name__}: {event!r:.80}"
        )


class EventStream:
    """The bounded mailbox of one run: events in FIFO order, then exactly one terminal event.

    Guarantees:
    - Thread-safe: any thread may push, read or end the stream; asyncio code uses `apush`,
      `async for` and `aresult`, which never block the event loop. One internal lock guards the
      state; no user code runs under it.
    - Overflow (`max_queue` events queued): `"error"` raises `StreamOverflow` and does not accept
      the event; `"drop_oldest"` evicts the oldest queued event; `"drop_newest"` discards the new
      one; `"block"` waits for space (up to the push `timeout`), then raises `StreamOverflow`.
    - Every gap is visible: a reader sees `EventsDropped(count=n)` immediately before the event
      that follows `n` dropped events (or before the terminal), in the same take as that event,
      so a marker is never separated from it. Markers take no queue space and carry the stream's
      `agent`, `run_id` and the `seq` of the event they precede.
    - The first of `complete`, `error`, `cancel` wins; the terminal needs no queue space, so it is
      never lost to overflow. Events accepted before it are kept and delivered first, also to a
      reader that attaches after the end. Terminals carry the stream's `agent`, `run_id` and
      `seq` = 1 + the highest `seq` pushed.
    - Several readers share the events (each event goes to exactly one reader); every reader
      that reaches the end receives the terminal and stops.
    - A reader waiting on the pusher's event loop is woken at once. Under `"block"`, one
      waiting on another thread or loop, for an event pushed on an event loop's thread, is
      woken when that step of the loop ends (once for all the events of the step), or at
      once when the queue is half full; a pusher on a loop that then blocks its thread until
      such a reader took the event must use `push`, which wakes it before waiting. Under the
      other policies every reader is woken at once.
    - `timeout` bounds the lifetime: if no terminal arrived by then, the stream is canceled with
      reason `"timeout"` (served by one shared timer thread, not a thread per stream). If `owner`
      (the ref of a `supervisors.SupervisedActor`) exits for any reason before the end, the stream
      is canceled with reason `"owner_down"`.
    - `on_end` callbacks run once, right after the terminal is accepted, whoever ended the
      stream (`complete`/`error`/`cancel`, a terminal push, the timeout, the owner's exit):
      the producer of a run learns at once that nobody will read it any more.

    `multi_run=True` makes a stream that outlives runs (a subscription): the terminal events
    of runs (`AgentEnd`, `Error`, `Canceled`) are pushed as events, and only the stream's own
    end (`complete`/`error`/`cancel`) stops its readers. A run's terminal is never lost to
    overflow there either: it takes no queue space, so every policy queues it at once (no
    `StreamOverflow`, no wait, no discard), and `drop_oldest` evicts the oldest event that is
    not a run terminal. `max_queue` bounds the other events; the run terminals still unread
    come on top (one per run the reader is behind).

    Raises:
        ValueError: `max_queue < 1`, an unknown `overflow` policy, a `timeout <= 0` or an
            invalid `agent` key.
        TypeError: `owner` is not the ref of a `SupervisedActor`.
    """

    def __init__(
        self,
        max_queue: int = 10_000,
        overflow: OverflowPolicy = "error",
        timeout: float | None = None,
        *,
        owner: pykka.ActorRef[Any] | None = None,
        run_id: str = "",
        agent: AgentKey | None = None,
        multi_run: bool = False,
    ) -> None:
        if isinstance(max_queue, bool) or not isinstance(max_queue, int) or max_queue < 1:
            raise ValueError(f"invalid max_queue {max_queue!r} (expected an int >= 1)")
        if overflow not in _POLICIES:
            raise ValueError(
                f"unknown overflow policy {overflow!r} (expected one of: {', '.join(_POLICIES)})"
            )
        if timeout is not None and not timeout > 0:
            raise ValueError(f"invalid timeout {timeout!r} (expected seconds > 0, or None)")
        self._max_queue = max_queue
        self._overflow: OverflowPolicy = overflow
        self._run_id = run_id
        self._agent = None if agent is None else AgentKey.of(agent)
        # Reentrant: a collection that starts while a thread holds it (at an allocation) runs
        # finalizers there, and this stream's forgotten subscription's cancels the stream
        # (the shared timer thread ending it at its timeout hung there for good).
        self._lock = threading.RLock()
        self._readable = CountedCondition(self._lock)  # an item or the terminal is available
        self._writable = CountedCondition(self._lock)  # space freed, or the stream ended
        self._ended = CountedCondition(self._lock)  # the terminal was accepted
        self._async_readable = AsyncWaiters()
        self._async_writable = AsyncWaiters()
        self._async_ended = AsyncWaiters()
        # A multi-run stream pins the terminals of runs: they take no space and are never evicted.
        self._queue: GapQueue[Event] = GapQueue(pinned=is_terminal if multi_run else None)
        self._terminal: Terminal | None = None
        self._pulled_end = False
        self._max_seq = 0
        # The loop at whose step's end readers on other threads are owed a wake-up, if any.
        self._wake_owed_by: asyncio.AbstractEventLoop | None = None
        self._waiting_pushers = 0  # `push`/`apush` calls waiting for space (`room()`)
        self._multi_run = multi_run
        self._end_callbacks: list[EndCallback] = []
        self._watchdog = Watchdog()
        self._watchdog.arm(self, timeout, owner)

    @property
    def run_id(self) -> str:
        """The run id stamped on the events the stream builds (markers, terminal)."""
        return self._run_id

    @property
    def agent(self) -> AgentKey | None:
        """The agent key stamped on the events the stream builds (markers, terminal)."""
        return self._agent

    @property
    def max_queue(self) -> int:
        """The queue capacity."""
        return self._max_queue

    @property
    def overflow(self) -> OverflowPolicy:
        """The overflow policy of `push`."""
        return self._overflow

    @property
    def done(self) -> bool:
        """True once a terminal was accepted (queued events may still be unread)."""
        return self._terminal is not None

    @property
    def terminal(self) -> Terminal | None:
        """The terminal event, or None while the stream is open."""
        return self._terminal

    def stats(self) -> StreamStats:
        """A consistent snapshot of the counters (see `StreamStats` for their definitions)."""
        with self._lock:
            return self._queue.stats(self._max_queue)

    def __repr__(self) -> str:
        return (
            f"<EventStream run_id={self._run_id!r} queue={len(self._queue)}/{self._max_queue}"
            f" overflow={self._overflow} done={self.done}>"
        )

    def push(self, event: Event, timeout: float | None = None) -> bool:
        """Append `event`, applying the overflow policy if the queue is full.

        `timeout` bounds the wait of the `"block"` policy (None: until space or the end; 0: no
        wait); other policies never wait. Returns True if the event was queued, False if
        `drop_newest` discarded it. A terminal event (`AgentEnd`, `Error`, `Canceled`) ends
        the stream as `complete`/`error`/`cancel` would (it needs no space); in a multi-run
        stream it is queued at once instead, whatever the policy.

        Raises:
            StreamOverflow: the queue is full under `"error"`, or still full after `timeout`
                under `"block"`; the event was not accepted.
            StreamClosed: the stream has ended (also raised in a pusher blocked when it ends).
            ValueError: `timeout < 0`.
            TypeError: `event` is not an `Event` (see `CustomEvent` for your own data).
        """
        _check_event(event, "push")
        if self._ends_with(event):
            return self._end_with(event, strict=True)
        deadline = deadline_after(timeout, "push timeout")
        waiting = False
        with self._lock:
            try:
                while (accepted := self._offer_locked(event, self._overflow)) is None:
                    left = remaining(deadline)
                    if left is not None and left <= 0:
                        raise self._full(timeout)
                    if not waiting:
                        waiting, self._waiting_pushers = True, self._waiting_pushers + 1
                    self._wake_now_locked()  # a reader must make the space: it may not wait
                    self._writable.wait(left)
            finally:
                if waiting:
                    self._waiting_pushers -= 1
        return accepted

    async def apush(self, event: Event, timeout: float | None = None) -> bool:
        """`push` for asyncio: same policies, returns and errors; waiting never blocks the loop.

        Raises:
            StreamOverflow, StreamClosed, ValueError, TypeError: as `push`.
        """
        _check_event(event, "apush")
        if self._ends_with(event):
            return self._end_with(event, strict=True)
        deadline = deadline_after(timeout, "push timeout")
        waiting = False
        try:
            while True:
                with self._lock:
                    accepted = self._offer_locked(event, self._overflow)
                    if accepted is not None:
                        return accepted
                    left = remaining(deadline)
                    if left is not None and left <= 0:
                        raise self._full(timeout)
                    if not waiting:
                        waiting, self._waiting_pushers = True, self._waiting_pushers + 1
                    self._wake_now_locked()
                    fut = self._async_writable.add_locked()
                with contextlib.suppress(TimeoutError):  # the next offer raises StreamOverflow
                    await self._await(fut, self._async_writable, left)
        finally:
            if waiting:
                with self._lock:
                    self._waiting_pushers -= 1

    def offer(self, event: Event) -> bool | None:
        """`push` that never waits: True queued, False discarded (`drop_newest`), None when the
        `"block"` policy would wait for space (nothing queued then: `apush` it). For a pusher
        that is usually not kept waiting, such as an agent feeding its subscriptions.

        Raises:
            StreamOverflow, StreamClosed, TypeError: as `push`.
        """
        _check_event(event, "offer")
        return self.offer_known(event, is_terminal(event))

    def offer_known(self, event: Event, terminal: bool) -> bool | None:
        """`offer` for a caller that feeds one event to many streams and made sure once that
        it is an `Event`, and whether it is a terminal (`is_terminal`)."""
        if terminal and not self._multi_run:
            return self._end_with(event, strict=True)
        with self._lock:
            return self._offer_locked(event, self._overflow, terminal and self._multi_run)

    def offer_data(self, event: Event) -> bool | None:
        """`offer_known(event, False)` under `"block"` for an event that is no run's
        terminal, in one call: the run's fan-out of every delta to every subscription takes
        this path. False once the stream has ended (nothing raised: the subscription is
        closed), None when full (nothing queued: `apush` it)."""
        with self._lock:
            if self._terminal is not None:
                return False
            if event.seq > self._max_seq:
                self._max_seq = event.seq
            if not self._queue.append_within(event, self._max_queue):
                return self._offer_locked(event, self._overflow, False)
            self._wake_readers_locked()
            return True

    def room(self) -> int:
        """How many more events fit before the stream is full, less one for each pusher
        waiting for space (its event is owed the next free place); 0 once it has ended. A
        producer that gathers events to `offer_many` gathers no more than this."""
        with self._lock:
            if self._terminal is not None:
                return 0
            return max(self._max_queue - self._queue.held - self._waiting_pushers, 0)

    def offer_many(self, events: Sequence[Event]) -> bool:
        """Queue `events` (in `seq` order, none a run's terminal) in one go, with one wake-up
        of the readers, each as one at a time would be: under `"block"` as `offer_data`
        (the caller made sure they fit, `room()`; any beyond it are queued all the same, so
        none is lost), under `"drop_oldest"`/`"drop_newest"` as `push_async`, under `"error"`
        as `push(event, timeout=0)`. False, nothing queued, once the stream has ended.

        Raises:
            StreamOverflow: `"error"` and the stream filled up (the events before the one
                that did not fit are queued).
        """
        if not events:
            return True
        with self._lock:
            if self._terminal is not None:
                return False
            queue = self._queue
            policy = self._overflow
            if policy == "block" or len(events) <= self._max_queue - queue.held:
                last = events[-1].seq
                if last > self._max_seq:
                    self._max_seq = last
                queue.extend(events)
                self._wake_readers_locked()
                return True
            for event in events:
                self._offer_locked(event, policy, False)
            return True

    def push_async(self, event: Event) -> bool:
        """Append `event` without ever blocking; returns True if it was queued.

        On a full queue `"drop_oldest"` evicts the oldest event; every other policy discards the
        new one. Both are counted in `stats().dropped` and reported to readers by a marker. After
        the end, the event is ignored (False). A terminal event ends the stream (True if this
        call ended it), so forwarding every event of `loop.run` here is safe; in a multi-run
        stream it is always queued (True while the stream is open).

        Raises:
            TypeError: `event` is not an `Event` (the only error: overflow and the end
                never raise here).
        """
        _check_event(event, "push_async")
        if self._ends_with(event):
            return self._end_with(event, strict=False)
        policy: OverflowPolicy = "drop_oldest" if self._overflow == "drop_oldest" else "drop_newest"
        with self._lock:
            if self._terminal is not None:
                return False
            return bool(self._offer_locked(event, policy))

    def _ends_with(self, event: Event) -> bool:
        """A terminal event ends a single-run stream; a multi-run stream queues it as data."""
        return not self._multi_run and is_terminal(event)

    def _pins(self, event: Event) -> bool:
        """A run's terminal in a multi-run stream: queued without space, under every policy."""
        return self._multi_run and is_terminal(event)

    def _end_with(self, event: Event, *, strict: bool) -> bool:
        with self._lock:
            self._max_seq = max(self._max_seq, event.seq - 1)
        assert isinstance(event, AgentEnd | Error | Canceled)
        ended = self._finish(event)
        if strict and not ended:
            raise StreamClosed(f"stream {self._run_id!r} has ended; it accepts no more events")
        return ended

    def _offer_locked(
        self, event: Event, policy: OverflowPolicy, pinned: bool | None = None
    ) -> bool | None:
        """Apply `policy`: True queued, False discarded, None must wait for space. `pinned`:
        whether `event` is a run's terminal in a multi-run stream, if the caller knows."""
        if self._terminal is not None:
            raise StreamClosed(f"stream {self._run_id!r} has ended; it accepts no more events")
        if event.seq > self._max_seq:
            self._max_seq = event.seq
        if pinned is None:
            pinned = self._pins(event)
        if self._queue.held >= self._max_queue and not pinned:
            if policy == "error":
                raise self._full(None)
            if policy == "block":
                return None
            if policy == "drop_newest":
                self._queue.refuse()
                return False
            self._queue.evict()
        self._queue.append(event, pinned)
        self._wake_readers_locked()
        return True

    def _wake_readers_locked(self) -> None:
        """Tell readers an event is queued: at once from a thread without an event loop and to
        readers on the calling loop; a reader on another thread (or loop) when the calling
        loop's current step is over, so a burst of events wakes it once (`_deferred_wakes`).
        Only under `"block"`, whose pusher waits for space instead of losing events, and
        only up to half full: the other policies' readers are woken at once, as before."""
        loop = asyncio._get_running_loop()
        if loop is None:
            self._readable.notify()
            self._async_readable.wake_all_locked()
            return
        others = self._async_readable.wake_local_locked(loop)
        if not (others or self._readable.waiting):
            return
        if self._overflow != "block" or 2 * self._queue.held >= self._max_queue:
            self._wake_all_readers_locked()
        elif self._wake_owed_by is not loop:  # (owed by another loop: its step may not end)
            self._wake_owed_by = loop
            wake_after_step(loop, self._wake_deferred_readers)

    def _wake_deferred_readers(self) -> None:
        with self._lock:
            self._wake_now_locked()

    def _wake_now_locked(self) -> None:
        """Wake the readers a deferred wake-up is owed to (before the caller waits itself)."""
        if self._wake_owed_by is not None:
            self._wake_all_readers_locked()

    def _wake_all_readers_locked(self) -> None:
        """Wake every waiting reader, on any thread or loop; nothing is owed after it."""
        self._wake_owed_by = None
        self._readable.notify_all()
        self._async_readable.wake_all_locked()

    def _full(self, timeout: float | None) -> StreamOverflow:
        waited = "" if timeout is None else f" after waiting {timeout}s"
        return StreamOverflow(
            f"stream {self._run_id!r} is full ({self._max_queue} events queued,"
            f" overflow={self._overflow!r}){waited}"
        )

    def complete(self, new_messages: Iterable[Message] = ()) -> bool:
        """End the run successfully with `AgentEnd(new_messages)`; True if this call ended it."""
        return self._finish(AgentEnd(new_messages=list(new_messages)))

    def error(self, reason: str, partial: AssistantMessage | None = None) -> bool:
        """End the run with `Error(reason, partial)`; True if this call ended it."""
        return self._finish(Error(reason=reason, partial=partial))

    def cancel(self, reason: str = "canceled") -> bool:
        """End the run with `Canceled(reason)`; True if this call ended it.

        Accepted events are kept: readers get them in order, then the `Canceled` event.
        """
        return self._finish(Canceled(reason=reason))

    def on_end(self, callback: EndCallback) -> Callable[[], None]:
        """Call `callback(terminal)` once the stream ends (at once if it already has).

        The callback runs on the thread that ended the stream (the shared timer thread for
        the `timeout`, a monitor's thread for the owner's exit), after the terminal was
        accepted and outside the stream's lock; it must be quick and must not block. An
        exception it raises is logged and does not reach whoever ended the stream. Returns a
        function that unregisters the callback (idempotent; no effect once it ran).
        """
        with self._lock:
            terminal = self._terminal
            if terminal is None:
                self._end_callbacks.append(callback)
        if terminal is not None:
            self._run_end_callback(callback, terminal)

        def remove() -> None:
            with self._lock:
                if callback in self._end_callbacks:
                    self._end_callbacks.remove(callback)

        return remove

    def on_end_dropped(self, callback: Callable[[int], object]) -> Callable[[], None]:
        """Call `callback(dropped)` once the stream ends, with every event overflow dropped
        (`stats().dropped` then), as `on_end` calls its callbacks. What is registered holds
        the stream's counters, not the stream: the count arrives also when the stream ends
        as its subscription is collected (a weak reference to the stream is cleared by then).
        """
        return self.on_end(_DroppedAtEnd(self._queue, callback))

    def _run_end_callback(self, callback: EndCallback, terminal: Terminal) -> None:
        try:
            callback(terminal)
        except Exception:
            log.exception("event_stream.end_callback.failed", run_id=self._run_id)

    def _finish(self, terminal: Terminal) -> bool:
        lock = self._lock
        while True:  # the terminal is made unlocked: a finalizer run there finds nothing half done
            seq = self._max_seq + 1
            ended = terminal.model_copy(
                update={"agent": self._agent, "run_id": self._run_id, "seq": seq}
            )
            lock.acquire()
            if self._terminal is not None:
                lock.release()
                return False
            if seq == self._max_seq + 1:
                break  # holding the lock
            lock.release()  # an event came in meanwhile: the terminal's seq follows it
        try:
            self._terminal = ended
            self._ended.notify_all()
            self._readable.notify_all()
            self._writable.notify_all()
            for waiters in (self._async_readable, self._async_writable, self._async_ended):
                waiters.wake_all_locked()
            callbacks, self._end_callbacks = self._end_callbacks, []
        finally:
            lock.release()
        self._watchdog.disarm()
        for callback in callbacks:
            self._run_end_callback(callback, ended)
        return True

    def _take_locked(self) -> tuple[EventsDropped | None, Event] | None:
        """The next event (or the terminal) for a reader with its gap marker; None: wait."""
        q = self._queue
        if q:
            gap, event = q.popleft()
            self._freed_locked(1)
        elif self._terminal is not None:
            gap, event = q.pop_tail_gap(), self._terminal
        else:
            return None
        if not gap:
            return None, event
        # The identity of the event the gap comes before: in a subscription, of its run (one
        # of the agent's, or of a delegate's), not the subscription's.
        agent = event.agent if event.agent is not None else self._agent
        return EventsDropped(
            agent=agent, run_id=event.run_id or self._run_id, seq=event.seq, count=gap
        ), event

    def __iter__(self) -> Iterator[Event]:
        """Yield events (and gap markers) in FIFO order, then the terminal, then stop.

        Blocks while the stream is open and empty; the stream's `timeout`, owner or a `cancel`
        from another thread is the way out of a wait.
        """
        while True:
            with self._lock:
                while (taken := self._take_locked()) is None:
                    self._readable.wait()
            marker, item = taken
            if marker is not None:
                yield marker
            yield item
            if item is self._terminal:
                return

    async def __aiter__(self) -> AsyncIterator[Event]:
        """`__iter__` for asyncio: waiting for events never blocks the event loop, and events
        are taken in batches, yielding to the loop once per batch (as `apull_many`)."""
        while True:
            batch = await self._take_batch(256, None, once=False)
            for item in batch:
                yield item
            if batch[-1] is self._terminal:
                return

    def pull_many(self, max_items: int = 256, timeout: float | None = None) -> list[Event]:
        """Take up to `max_items` events at once, waiting up to `timeout` for at least one.

        Returns what is available, each event preceded by its gap marker if any (markers do not
        count toward `max_items`), ending with the terminal once it is reached; returns `[]` on
        timeout and on every call after the terminal was returned.

        Raises:
            ValueError: `max_items < 1` or `timeout < 0`.
        """
        if max_items < 1:
            raise ValueError(f"invalid max_items {max_items!r} (expected an int >= 1)")
        deadline = deadline_after(timeout, "pull timeout")
        with self._lock:
            while not self._pulled_end:
                out = self._take_many_locked(max_items)
                if out:
                    self._pulled_end = out[-1] is self._terminal
                    return out
                left = remaining(deadline)
                if left is not None and left <= 0:
                    break
                self._readable.wait(left)
        return []

    async def apull_many(self, max_items: int = 256, timeout: float | None = None) -> list[Event]:
        """`pull_many` for asyncio: waiting never blocks the event loop, and a batch that was
        ready at once is handed out after one turn of the loop (`sleep(0)`), so a reader that
        never waits still lets the rest of its loop run between batches.

        Raises:
            ValueError: as `pull_many`.
        """
        if max_items < 1:
            raise ValueError(f"invalid max_items {max_items!r} (expected an int >= 1)")
        return await self._take_batch(max_items, deadline_after(timeout, "pull timeout"))

    async def _apull_until(self, max_items: int, alarm: LoopAlarm) -> list[Event]:
        """`apull_many` up to the deadline of `alarm` (the reader's one timer for all its
        pulls: `Subscription.auntil_end`); `[]` once it passed."""
        return await self._take_batch(max_items, alarm.deadline, alarm=alarm)

    async def _take_batch(
        self,
        max_items: int,
        deadline: float | None,
        *,
        once: bool = True,
        alarm: LoopAlarm | None = None,
    ) -> list[Event]:
        """A batch for an async reader (`[]` on timeout). `once`: the terminal is handed out
        once per stream (`apull_many`), else once per reader (`async for`). `alarm`, when
        given, times the waits (its deadline is `deadline`)."""
        waited = False
        while True:
            with self._lock:
                if once and self._pulled_end:
                    return []
                out = self._take_many_locked(max_items)
                if out:
                    if once:
                        self._pulled_end = out[-1] is self._terminal
                    break
                left = remaining(deadline)
                if left is not None and left <= 0:
                    return []
                fut = self._async_readable.add_locked()
            with contextlib.suppress(TimeoutError):  # the next take returns what there is
                await self._await(fut, self._async_readable, left, alarm)
            waited = True
        if not waited:  # the loop has not had a turn since the last batch: give it one
            await asyncio.sleep(0)
        return out

    def _freed_locked(self, count: int) -> None:
        """`count` events left the queue: as many pushers waiting for space may go on."""
        if self._overflow == "block":
            self._writable.notify(count)
            self._async_writable.wake_all_locked()

    def _take_many_locked(self, max_items: int) -> list[Event]:
        """Up to `max_items` events, each after its gap marker, ending with the terminal if
        it is reached."""
        out: list[Event] = self._queue.take_ungapped(max_items)  # no markers: in one go
        count = len(out)
        if count:
            self._freed_locked(count)
        while count < max_items and (taken := self._take_locked()) is not None:
            marker, item = taken
            if marker is not None:
                out.append(marker)
            out.append(item)
            count += 1
            if item is self._terminal:
                break
        return out

    def result(self, timeout: float | None = None) -> list[Message]:
        """Wait for the terminal and return `AgentEnd.new_messages` (queued events stay unread).

        Raises:
            RunFailed: the run ended with `Error` (carries `reason` and `partial`).
            RunCanceled: the run ended with `Canceled` (carries `reason`).
            TimeoutError: no terminal within `timeout` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._terminal is None:
                left = remaining(deadline)
                if left is not None and left <= 0:
                    raise TimeoutError(f"stream {self._run_id!r} did not end within {timeout}s")
                self._ended.wait(left)
        return self._outcome()

    async def aresult(self, timeout: float | None = None) -> list[Message]:
        """`result` for asyncio: waiting never blocks the event loop.

        Raises:
            RunFailed, RunCanceled, TimeoutError: as `result`.
        """
        with self._lock:
            fut = None if self._terminal is not None else self._async_ended.add_locked()
        if fut is not None:
            try:
                await self._await(fut, self._async_ended, timeout)
            except TimeoutError:
                raise TimeoutError(
                    f"stream {self._run_id!r} did not end within {timeout}s"
                ) from None
        return self._outcome()

    def _outcome(self) -> list[Message]:
        terminal = self._terminal
        if isinstance(terminal, AgentEnd):
            return list(terminal.new_messages)
        if isinstance(terminal, Error):
            raise run_failed(terminal.reason, terminal.partial)
        assert isinstance(terminal, Canceled)
        raise RunCanceled(terminal.reason)

    async def _await(
        self,
        fut: asyncio.Future[None],
        waiters: AsyncWaiters,
        timeout: float | None,
        alarm: LoopAlarm | None = None,
    ) -> None:
        """Wait for `fut`: until `alarm`'s deadline when given (the reader's one timer), else
        up to `timeout` (TimeoutError); `fut` no longer parked in `waiters` afterwards."""
        try:
            if alarm is not None:
                await alarm.wait(fut)
            elif timeout is None:
                await fut
            else:
                async with asyncio.timeout(timeout):
                    await fut
        finally:
            if not fut.done() or fut.cancelled():
                with self._lock:
                    waiters.discard_locked(fut)
