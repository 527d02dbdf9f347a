"""The streamed tokens of one step of the event loop, handed to each subscription in one go.

A run's tokens come many per step of the loop (a provider's read holds dozens of them, a
scripted answer all of them). Handing each token to each subscription costs a lock, a queue
append and a wake-up check per subscription per token, so ten subscriptions cost ten times
one. Here the tokens of a step are gathered, in the order they were made, and each
subscription takes them as one batch:
- when the step is over (a callback of the loop's next turn);
- before any other event of any agent of the loop reaches a subscription, and before the
  subscriptions of any agent change, so every subscription still gets every event in the
  order it was made, and one made before a subscription began never reaches it;
- when a `block` subscription would be full: the batch never holds more tokens for a
  subscription than it has room for (other batches' claims counted), so backpressure and
  the bound of the buffer hold as they do token by token.
One `StepBatch` per event loop, touched only by the loop's thread while the loop lives; once
it is closed (its thread died), whoever ends its agents flushes it from their own thread.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import Protocol

from agent_runtime.event_stream import EventStream, Subscription
from agent_runtime.event_stream._subscription import deliver_many
from agent_runtime.events import Event
from supervisors._log import get_logger

log = get_logger(__name__)

# At most this many tokens in one batch when no `block` subscription bounds it.
MAX_BATCH = 4096


class Source(Protocol):
    """An agent whose tokens are batched (`agent._cell.AgentCell`): its subscriptions and its
    delegating parent's, which get its events too."""

    @property
    def subscriptions(self) -> tuple[weakref.ref[Subscription], ...]: ...
    @property
    def parent(self) -> Source | None: ...


Target = tuple["weakref.ref[Subscription]", EventStream]


class _Gathered:
    """Tokens of one agent, in order, for the subscriptions it had when the first came."""

    __slots__ = ("events", "room", "source", "targets")

    def __init__(self, source: Source, targets: list[Target], room: int) -> None:
        self.source = source
        self.targets = targets
        self.room = room  # tokens it may still take
        self.events: list[Event] = []


class StepBatch:
    """The tokens gathered on one event loop's thread since its subscriptions last got any."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Weak: the batches are kept by loop (`_by_loop`), whose entries must not keep
        # their loops alive.
        self._loop = weakref.ref(loop)
        self._gathered: list[_Gathered] = []
        # Room of `block` buffers promised to a gathering (each buffer's own lock guards
        # what is queued; this only keeps two gatherings from counting the same room).
        self._claimed: dict[EventStream, int] = {}

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The batch's loop (None once it was collected)."""
        return self._loop()

    def add(self, source: Source, event: Event) -> bool:
        """Gather `event`, a token of `source`; False when it was not gathered because a
        `block` subscription has no room left: the caller hands it over itself, after
        everything gathered before (`flush` was called)."""
        gathered = self._gathered
        if gathered:
            last = gathered[-1]
            if last.source is source and last.room:
                last.events.append(event)
                last.room -= 1
                return True
        opened = self._open(source)
        if opened is None:
            self.flush()
            return False
        if not gathered:
            loop = self._loop()
            assert loop is not None  # (its thread runs it: `step_batch`)
            loop.call_soon(self.flush)  # the step is over: they go out
        opened.events.append(event)
        opened.room -= 1
        gathered.append(opened)
        return True

    def _open(self, source: Source) -> _Gathered | None:
        targets: list[Target] = []
        room = MAX_BATCH
        blocking: list[EventStream] = []
        cell: Source | None = source
        while cell is not None:
            for ref in cell.subscriptions:
                sub = ref()
                if sub is None:
                    continue
                stream = sub.stream
                if sub.overflow == "block":
                    blocking.append(stream)
                    room = min(room, stream.room() - self._claimed.get(stream, 0))
                targets.append((ref, stream))
            cell = cell.parent
        if room <= 0:
            return None
        for stream in blocking:
            self._claimed[stream] = self._claimed.get(stream, 0) + room
        return _Gathered(source, targets, room)

    def flush(self) -> None:
        """Hand every gathered token to its subscriptions, in the order they were made."""
        gathered, self._gathered = self._gathered, []
        if not gathered:
            return
        self._claimed.clear()
        for batch in gathered:
            events = batch.events
            for ref, stream in batch.targets:
                try:
                    deliver_many(ref, stream, events)
                except Exception:  # a bug: the other subscriptions still get theirs
                    log.exception("fan_out.batch_failed", events=len(events))


_local = threading.local()  # the batch of the loop the thread ran last: the per-token path
_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, StepBatch] = (
    weakref.WeakKeyDictionary()
)


def step_batch(loop: asyncio.AbstractEventLoop) -> StepBatch:
    """The batch of `loop`, the running loop of the calling thread."""
    batch: StepBatch | None = getattr(_local, "batch", None)
    if batch is None or batch.loop is not loop:
        if batch is not None:  # a loop of this thread that ended with tokens gathered
            batch.flush()
        batch = _local.batch = _by_loop.get(loop)
        if batch is None:
            batch = _local.batch = _by_loop[loop] = StepBatch(loop)
    return batch


def flush_gathered(loop: asyncio.AbstractEventLoop) -> None:
    """Hand the tokens gathered on `loop` to their subscriptions now (before another event,
    or a change of subscriptions). On `loop`'s thread, or on any thread once it is closed."""
    batch: StepBatch | None = getattr(_local, "batch", None)
    if batch is None or batch.loop is not loop:
        batch = _by_loop.get(loop)
    if batch is not None:
        batch.flush()
