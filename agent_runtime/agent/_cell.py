"""AgentCell: what outlives each incarnation of an agent's actor (identity, subscriptions, end).

A `transient` agent is restarted as a fresh `AgentActor`; the `Agent` handle, its open
subscriptions and the options changed with `set_*` stay here, so callers keep one handle.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import pykka

from agent_runtime._key import AgentKey
from agent_runtime.abort import AbortSignal
from agent_runtime.agent._host import AgentHost
from agent_runtime.agent._options import AgentOptions
from agent_runtime.agent._protocol import PruneSubscriptions
from agent_runtime.agent._status import ActorStatus, RunProgress
from agent_runtime.agent._step_batch import flush_gathered, step_batch
from agent_runtime.event_stream import Subscription
from agent_runtime.event_stream._subscription import deliver, deliver_now
from agent_runtime.events import Event, MessageUpdate
from agent_runtime.messages import Message
from supervisors import ExitReason, LoopFuture
from supervisors._log import LibraryLogger, get_logger


class CellRun(Protocol):
    """What the cell knows of a run (`agent._run.AgentRun`)."""

    @property
    def signal(self) -> AbortSignal: ...
    @property
    def outcome(self) -> LoopFuture[Event]: ...
    def crash(self, reason: str) -> None: ...


class Incarnation(Protocol):
    """What the cell and the handle know of an incarnation (`agent._actor.AgentActor`)."""

    @property
    def actor_ref(self) -> pykka.ActorRef[Any]: ...
    @property
    def run(self) -> CellRun | None: ...
    def take_run(self) -> CellRun | None: ...
    def handle_now(self, message: Any) -> Any: ...
    def on_loop_thread(self) -> bool: ...


log = get_logger(__name__)

SubscriptionRefs = tuple["weakref.ref[Subscription]", ...]


class AgentCell:
    """The agent between incarnations of its actor.

    Owned by the runtime's event loop: every field is written on that loop's thread (by the
    current actor, its run, or an exit heard of elsewhere and handed to the loop). Other
    threads read only whole values published by one assignment: `ref`, `actor`, `stopped`,
    `status` and `progress` (immutable snapshots, for `Runtime.tree()`), `subscriptions` (an
    immutable tuple) and `incarnation` (a future set when the next incarnation is ready).
    """

    def __init__(
        self,
        key: AgentKey,
        host: AgentHost,
        options: AgentOptions,
        parent: AgentCell | None,
        loop: asyncio.AbstractEventLoop,
        history: tuple[tuple[Message, ...], int] | None,
    ) -> None:
        self.key = key
        self.host = host
        self.options = options
        self.parent = parent
        self.loop = loop
        self.handle: Any = None  # the Agent (typed Any: the handle module builds on this one)
        self.ref: pykka.ActorRef[Any] | None = None
        self.actor: Incarnation | None = None  # the current incarnation, once ready
        self.child_ref: pykka.ActorRef[Any] | None = None  # what the subagents supervisor holds
        self.subscriptions: SubscriptionRefs = ()
        self.stopped = False
        self.stop_reason = ""
        # Started, their end not yet delivered; oldest first. A tuple, replaced on each
        # change (at most a few): an idle agent's is the empty tuple, no object to walk.
        self.runs: tuple[CellRun, ...] = ()
        self.last_task: asyncio.Task[None] | None = None  # of the newest run
        self.status: ActorStatus | None = None  # None until the first incarnation started
        self.progress: RunProgress | None = None
        self.incarnations = 0  # actors started so far: a transient agent's restarts + 1
        self.incarnation: LoopFuture[bool] = LoopFuture()  # set: a new one is ready (True)
        # The actor's: (options, model, LoopConfig) built from them, reused while they stay.
        self.loop_settings: tuple[Any, Any, Any] | None = None
        self.preloaded = history  # the first incarnation's history, read by start_agent
        self.parked: Any = None  # its turn parked waiting for approvals, read with it
        self.unstored: tuple[Message, ...] = ()  # its kept prompt not in memory, read with it
        self.pending_approvals: tuple[Any, ...] = ()  # published by the actor
        if parent is not None:
            # Its spawned subagents, made at the first (a WeakSet is ~700 bytes; most have
            # none); `setdefault` is one step, so two tools spawning at once share one set.
            siblings = vars(parent).setdefault("_children", weakref.WeakSet())
            siblings.add(self)

    # -- incarnations (on the loop) ---------------------------------------------------------------

    @functools.cached_property
    def log(self) -> LibraryLogger:
        """The agent's logger, bound on first use (an idle agent logs nothing)."""
        key = self.key
        return log.bind(session=key.session, role=key.role, index=key.index)

    @property
    def children(self) -> list[AgentCell]:
        """Its spawned subagents still alive (a new list: safe to iterate while they stop)."""
        children: weakref.WeakSet[AgentCell] | None = vars(self).get("_children")
        return [] if children is None else list(children)

    def attach(self, actor: Incarnation) -> None:
        """A new incarnation is ready to take calls."""
        if self.stopped:
            return
        self.ref, self.actor = actor.actor_ref, actor
        self.incarnations += 1
        if self.incarnations > 1:
            self.host.counters.restarted()
        ready, self.incarnation = self.incarnation, LoopFuture()
        ready.set(True)

    def exited(self, actor: Incarnation, reason: ExitReason) -> None:
        """The incarnation `actor` exited (on the loop): its run ends with it."""
        if self.actor is actor:
            self.actor = None
        run = actor.take_run()  # an exited actor hears of no run's end: it lets go of it here
        if reason.abnormal:
            self.log.error("agent.crashed", reason=str(reason))
            if run is not None:
                run.crash(str(reason))
        if not reason.abnormal:
            self.end("agent_stopped")
        elif self.options.restart == "temporary":
            self.end(f"agent_crashed: {reason}")
        if self.stopped:
            # No incarnation comes after this one: nothing registers the handle or builds a
            # run's settings again. Both refer back to this cell (the handle, and the
            # settings' spawner); held on, they would leave every agent a server stops to
            # the cyclic collector.
            self.handle = None
            self.loop_settings = None

    def on_loop(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the agent's loop: now when called there, else soon; now on the
        calling thread when the loop is closed (it died: nothing else runs there again)."""
        if asyncio._get_running_loop() is self.loop:
            fn()
            return
        try:
            self.loop.call_soon_threadsafe(fn)
        except RuntimeError:
            fn()

    # -- runs (on the loop) -----------------------------------------------------------------------

    def run_started(self, run: CellRun) -> None:
        self.runs = (*self.runs, run)

    def undelivered(self) -> CellRun | None:
        """The newest run whose end is not delivered yet."""
        return self.runs[-1] if self.runs else None

    # -- the end (on the loop) --------------------------------------------------------------------

    def end(self, reason: str) -> None:
        """End the agent for good (idempotent): its run is aborted, and its subscriptions
        close once the run's end was delivered (at once if no run is in flight)."""
        if self.stopped:
            return
        self.stopped, self.stop_reason = True, reason
        ready, self.incarnation = self.incarnation, LoopFuture()
        ready.set(False)  # waiters for a restart: none comes
        self.log.info("agent.ended", reason=reason)
        for run in self.runs:
            run.signal.abort(reason)
        if not self.runs:
            self.close_subscriptions()
        self._stop_children()

    def _stop_children(self) -> None:
        """Stop its spawned subagents still running: a subagent ends with its parent, also
        with one that crashed for good (a stop has stopped them first already)."""
        for child in self.children:
            handle = child.handle
            if child.stopped or handle is None:
                continue
            with contextlib.suppress(RuntimeError):  # the loop's tasks are stopping: so are they
                self.host.loop_tasks.spawn(self.host.astop_agent(handle), _ignore_end)

    def run_delivered(self, run: CellRun) -> None:
        """`run`'s end reached the subscriptions: close them if the agent has ended and no
        other run's end is still to come."""
        self.runs = tuple(r for r in self.runs if r is not run)
        if self.stopped and not self.runs:
            self.close_subscriptions()

    def close_subscriptions(self) -> None:
        flush_gathered(self.loop)  # the tokens made before the end, first
        refs, self.subscriptions = self.subscriptions, ()
        for ref in refs:
            sub = ref()
            if sub is not None:
                sub.stream.cancel(f"agent_stopped: {self.stop_reason}")

    def live_subscriptions(self) -> list[weakref.ref[Subscription]]:
        return [r for r in self.subscriptions if (s := r()) is not None and not s.closed]

    def weak_subscription(self, sub: Subscription) -> weakref.ref[Subscription]:
        """A weak reference to `sub` that, once `sub` is collected, has the current actor
        drop the dead references."""

        def collected(_: weakref.ref[Subscription]) -> None:
            actor = self.actor
            if actor is not None:
                with contextlib.suppress(pykka.ActorDeadError):
                    actor.actor_ref.tell(PruneSubscriptions())

        return weakref.ref(sub, collected)

    # -- fan-out (on the loop) --------------------------------------------------------------------

    def hand_out_token(
        self, event: MessageUpdate, until: AbortSignal | None = None
    ) -> Awaitable[None] | None:
        """Hand a streamed token to the subscriptions (this agent's and its ancestors'):
        gathered with the other tokens of the loop's step (`_step_batch`), or, when a `block`
        subscription is full, delivered as any event is; what to await then."""
        if step_batch(asyncio.get_running_loop()).add(self, event):
            return None
        full = self.fan_out_now(event, False)
        return self.fan_out_rest(full, event, until) if full else None

    def fan_out_now(self, event: Event, terminal: bool) -> list[weakref.ref[Subscription]]:
        """Deliver `event` (`terminal`: `is_terminal(event)`, asked once for every
        subscription) to this agent's subscriptions, then to its ancestors' (delegation),
        without waiting, after the tokens gathered on this loop; returns those full `block`
        subscriptions that must be waited for (`fan_out_rest`), in order. The common case,
        nobody full, costs no coroutine."""
        flush_gathered(self.loop)
        full: list[weakref.ref[Subscription]] = []
        cell: AgentCell | None = self
        while cell is not None:
            for ref in cell.subscriptions:
                if deliver_now(ref, event, terminal) is None:
                    full.append(ref)
            cell = cell.parent
        return full

    async def fan_out_rest(
        self, full: list[weakref.ref[Subscription]], event: Event, until: AbortSignal | None = None
    ) -> None:
        """Wait for each subscription `fan_out_now` found full to take `event`; once `until`
        (the run's signal) aborts, no more (see `deliver`).

        Only weak refs are held while a delivery waits, so a subscription dropped by its reader
        is collected and closed, which ends the wait at once.
        """
        for ref in full:
            await deliver(ref, event, until)

    def push_now(self, event: Event) -> None:
        """Hand `event` to every subscription without waiting (the loop is going away)."""
        flush_gathered(self.loop)
        cell: AgentCell | None = self
        while cell is not None:
            for ref in cell.subscriptions:
                sub = ref()
                if sub is not None:
                    sub.stream.push_async(event)
            cell = cell.parent

    def listened(self) -> bool:
        """True when some subscription (its own or an ancestor's) may want its events."""
        cell: AgentCell | None = self
        while cell is not None:
            if cell.subscriptions:
                return True
            cell = cell.parent
        return False


def _ignore_end(_cancelled: bool, _error: BaseException | None) -> None:
    """A child's stop needs no follow-up: its own end logs what went wrong."""
