"""AgentShell: what outlives each incarnation of an agent's actor (identity, subscriptions, ends).

A `transient` agent is restarted as a fresh `AgentActor`; the `Agent` handle, its open
subscriptions and the options changed with `set_*` stay here, so callers keep one handle.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from concurrent.futures import Future
from typing import Any

import pykka

from agent_runtime._key import AgentKey
from agent_runtime.agent._host import AgentHost
from agent_runtime.agent._messages import answer
from agent_runtime.agent._options import AgentOptions
from agent_runtime.agent._run import Queued, RunInbox, RunView
from agent_runtime.agent._status import ActorStatus, RunProgress
from agent_runtime.event_stream import Subscription
from agent_runtime.event_stream._subscription import deliver, deliver_now
from agent_runtime.events import Event
from supervisors import ExitReason, monitor
from supervisors._log import get_logger

log = get_logger(__name__)

SubscriptionRefs = tuple["weakref.ref[Subscription]", ...]


class IncarnationExited(Exception):
    """Set on the reply of a call whose actor exited before answering it."""


class AgentShell:
    """The agent between incarnations of its actor.

    Written by one side each: `ref`, `subscriptions`, `options` and `status` by the current
    actor (subscriptions also emptied when the agent ends); `last_driver` and `progress` by
    the event-loop thread. `status` and `progress` are immutable snapshots for
    `Runtime.tree()` (see `_status`).
    The runs whose end is not yet delivered, `stopped`, `children` and the start ticket
    change under this module's lock, which is never held while calling out.

    The start ticket lets one caller start a run without waiting for the actor's answer: the
    actor offers it while it is idle and any prompt would start (`offer_start`); the first
    caller to `reserve_start` holds the agent's next start, and the actor starts that run
    before any other (`withdraw_start` tells it a reservation is on its way).

    There can be two such runs: the actor hears of a run's end just before the end is
    delivered, so it may accept the next run meanwhile. The subscriptions close only once the
    agent has ended and the end of every run it accepted was delivered (DESIGN.md 7), and no
    run is accepted once the agent has ended.
    """

    def __init__(
        self, key: AgentKey, host: AgentHost, options: AgentOptions, parent: AgentShell | None
    ) -> None:
        self.key = key
        self.host = host
        self.options = options
        self.parent = parent
        self.handle: Any = None  # the Agent (typed Any: the handle module builds on this one)
        self.ref: pykka.ActorRef[Any] | None = None
        self.child_ref: pykka.ActorRef[Any] | None = None  # what the subagents supervisor holds
        self.subscriptions: SubscriptionRefs = ()
        self._undelivered: list[RunView] = []  # oldest first
        self.stopped = False
        self._ticket = False  # offered by the idle actor; see reserve_start
        self._reserved: str | None = None  # the run id of the caller holding the ticket
        self.stop_reason = ""
        self.last_driver: asyncio.Task[None] | None = None
        self.status: ActorStatus | None = None  # None until the first incarnation started
        self.progress: RunProgress | None = None
        self.incarnations = 0  # actors started so far: a transient agent's restarts + 1
        # The actor's: (options, model, LoopConfig) built from them, reused while they stay.
        self.loop_settings: tuple[Any, Any, Any] | None = None
        self._children: weakref.WeakSet[AgentShell] = weakref.WeakSet()
        self._replies: weakref.WeakSet[Future[Any]] = weakref.WeakSet()  # calls not answered
        # Replies nobody waits on (reserved starts): held here until settled, so an exit that
        # drops their message still fails them (the WeakSet alone would lose them).
        self._held: set[Future[Any]] = set()
        self._lock = threading.Condition()
        self.log = log.bind(session=key.session, role=key.role, index=key.index)
        if parent is not None:
            parent.add_child(self)

    # -- incarnations -----------------------------------------------------------------------------

    def attach(self, ref: pykka.ActorRef[Any]) -> None:
        """A new incarnation started (its `on_start`, in its thread): watch its exit."""
        with self._lock:
            self.ref = ref
            self.incarnations += 1
            restarted = self.incarnations > 1
            self._lock.notify_all()
        if restarted:
            self.host.counters.restarted()
        monitor(ref, lambda _ref, reason: self._incarnation_exited(reason))

    def new_reply(self, *, hold: bool = False) -> Future[Any]:
        """The reply future of a call about to be sent; failed if its actor exits first.
        It cannot be cancelled (a caller that stops waiting never makes the actor fail).
        `hold`: kept alive here until settled, for a caller that does not wait on it."""
        reply: Future[Any] = Future()
        reply.set_running_or_notify_cancel()
        with self._lock:
            self._replies.add(reply)
            if hold:
                self._held.add(reply)
        if hold:
            reply.add_done_callback(self._release)
        return reply

    def _release(self, reply: Future[Any]) -> None:
        with self._lock:
            self._held.discard(reply)

    def forget_reply(self, reply: Future[Any]) -> None:
        with self._lock:
            self._replies.discard(reply)
            self._held.discard(reply)

    @property
    def reserved(self) -> str | None:
        """The run id of a reserved start not yet taken by the actor (the agent is busy)."""
        with self._lock:
            return self._reserved

    @property
    def delivering(self) -> RunView | None:
        """The newest run whose end is not delivered yet (None once every end was)."""
        with self._lock:
            return self._undelivered[-1] if self._undelivered else None

    def _incarnation_exited(self, reason: ExitReason) -> None:
        with self._lock:
            self._ticket = False  # a reservation on its way fails with its call (unanswered)
            self._reserved = None
            view = self._undelivered[-1] if self._undelivered else None
            unanswered = list(self._replies)
            self._replies.clear()
        for reply in unanswered:
            answer(reply, exception=IncarnationExited(str(reason)))
        if reason.abnormal:
            self.log.error("agent.crashed", reason=str(reason))
            if view is not None:
                view.crash(str(reason))
        if not reason.abnormal:
            self.end("agent_stopped")
        elif self.options.restart == "temporary":
            self.end(f"agent_crashed: {reason}")

    # -- the start ticket -------------------------------------------------------------------------

    def offer_start(self, offered_by: pykka.ActorRef[Any]) -> None:
        """The actor `offered_by` is idle and nothing about a prompt's start can fail but a
        race: the next `reserve_start` succeeds (unless a reservation is still on its way).
        Actor thread; an incarnation that is no longer the current one offers nothing (the
        thread of a killed actor may still finish a handler)."""
        with self._lock:
            self._offer_locked(offered_by)

    def _offer_locked(self, offered_by: pykka.ActorRef[Any]) -> None:
        if not self.stopped and self._reserved is None and self.ref is offered_by:
            self._ticket = True

    def offer_start_after(self, view: RunView, started_by: pykka.ActorRef[Any]) -> None:
        """The run of `view`, started by the actor `started_by`, ended with its end told to
        that actor (which takes no other start before it handles the end: its mailbox is in
        order) and nothing queued that would start the next run: the next `reserve_start`
        succeeds before the actor has handled the end, so a caller's next prompt does not
        wait for it. Offered only when the actor would offer it once idle (a system prompt
        that is a plain string). The driver's thread, before the run's outcome is set."""
        inbox = view.inbox
        with self._lock:  # as `queue_follow_up`: a follow-up is queued before or after this
            if inbox.follow_ups or inbox.steering:
                return
            if not isinstance(self.options.system_prompt, str):
                return
            if self._reserved == view.run_id:  # its start arrived: the actor has yet to say so
                self._reserved = None
            if not view.end_handled:  # else the actor offered its own, or started another run
                self._offer_locked(started_by)

    def queue_follow_up(self, inbox: RunInbox, queued: Queued) -> None:
        """Queue `queued` in the inbox of the run in progress, withdrawing a ticket its driver
        offered with the run's end: a follow-up that comes too late for the run starts the
        next one, before any prompt that follows it. Actor thread."""
        with self._lock:
            inbox.follow_ups.append(queued)
            self._ticket = False

    def end_handled(self, view: RunView) -> None:
        """The actor handled the end of `view`'s run: from now on only the actor offers the
        ticket (`offer_start_after` would race its next start). Actor thread."""
        with self._lock:
            view.end_handled = True

    def withdraw_start(self) -> str | None:
        """The actor starts a run, or can no longer start one unchecked: no caller reserves
        from now on. Returns the run id of a reservation on its way to the actor (that run
        starts first), else None. Actor thread."""
        with self._lock:
            self._ticket = False
            return self._reserved

    def reserve_start(self, run_id: str) -> bool:
        """Take the ticket for run `run_id`; False if the actor offers none right now (the
        caller asks the actor instead). Any thread."""
        with self._lock:
            if not self._ticket or self.stopped or self.host.stopping:
                return False
            self._ticket, self._reserved = False, run_id
            return True

    def reservation_arrived(self, run_id: str) -> None:
        """The reserved start of `run_id` reached the actor (or will never: its caller gave
        it up). Actor thread, or the caller's."""
        with self._lock:
            if self._reserved == run_id:
                self._reserved = None

    def wait_replaced(self, old: pykka.ActorRef[Any] | None, timeout: float) -> bool:
        """Wait until an incarnation other than `old` runs; False if the agent ended first or
        `timeout` passed."""
        with self._lock:
            return (
                self._lock.wait_for(
                    lambda: self.stopped or (self.ref is not old and self.ref is not None), timeout
                )
                and not self.stopped
            )

    # -- the end ----------------------------------------------------------------------------------

    def end(self, reason: str) -> None:
        """End the agent for good (idempotent): its runs are aborted, and its subscriptions
        close once the end of each was delivered (at once if none is undelivered)."""
        with self._lock:
            if self.stopped:
                return
            self.stopped, self.stop_reason = True, reason
            views = list(self._undelivered)
            self._lock.notify_all()
        self.log.info("agent.ended", reason=reason)
        for view in views:
            view.signal.abort(reason)
        if not views:
            self.close_subscriptions()

    def run_started(self, view: RunView) -> bool:
        """Count `view` as a run whose end is to be delivered; False (and not counted) if the
        agent has ended: the run must not start."""
        with self._lock:
            if self.stopped:
                return False
            self._undelivered.append(view)
            return True

    def run_delivered(self, view: RunView) -> bool:
        """`view`'s end reached the subscriptions (or it never started); True if the agent has
        ended and no other run's end is still to be delivered: the caller closes the
        subscriptions."""
        with self._lock:
            if view in self._undelivered:
                self._undelivered.remove(view)
            return self.stopped and not self._undelivered

    def close_subscriptions(self) -> None:
        with self._lock:
            refs, self.subscriptions = self.subscriptions, ()
        for ref in refs:
            sub = ref()
            if sub is not None:
                sub.stream.cancel(f"agent_stopped: {self.stop_reason}")

    # -- delegation -------------------------------------------------------------------------------

    def add_child(self, child: AgentShell) -> None:
        with self._lock:
            self._children.add(child)

    def children(self) -> list[AgentShell]:
        with self._lock:
            return sorted(self._children, key=lambda c: c.key)

    # -- fan-out (on the loop thread) -------------------------------------------------------------

    def fan_out_now(self, event: Event, terminal: bool) -> list[weakref.ref[Subscription]]:
        """Deliver `event` (an Event; `terminal`: `is_terminal(event)`, asked once for every
        subscription) to this agent's subscriptions, then to its ancestors' (delegation),
        without waiting; returns those full `block` subscriptions that must be waited for
        (`fan_out_rest`), in order. The common case, nobody full, costs no coroutine."""
        full: list[weakref.ref[Subscription]] = []
        shell: AgentShell | None = self
        while shell is not None:
            for ref in shell.subscriptions:
                if deliver_now(ref, event, terminal) is None:
                    full.append(ref)
            shell = shell.parent
        return full

    async def fan_out_rest(self, full: list[weakref.ref[Subscription]], event: Event) -> None:
        """Wait for each subscription `fan_out_now` found full to take `event`.

        Only weak refs are held while a delivery waits, so a subscription dropped by its reader
        is collected and closed, which ends the wait at once.
        """
        for ref in full:
            await deliver(ref, event)

    def push_now(self, event: Event) -> None:
        """Hand `event` to every subscription without waiting (the loop is going away)."""
        shell: AgentShell | None = self
        while shell is not None:
            for ref in shell.subscriptions:
                sub = ref()
                if sub is not None:
                    sub.stream.push_async(event)
            shell = shell.parent
