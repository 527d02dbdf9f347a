"""DynamicSupervisor: children started on demand, each restarted alone (one_for_one)."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import pykka

from supervisors._actor import ExitReason, Monitor, SupervisedActor, watch
from supervisors._core import Child, SupervisorCore, SupervisorHandle
from supervisors._errors import MaxChildrenReached
from supervisors._intensity import Clock, check_intensity
from supervisors._log import LibraryLogger
from supervisors._shutdown import (
    START_TIMEOUT,
    await_started,
    begin_child,
    shutdown_child,
    shutdown_children,
)
from supervisors._spec import ChildSpec, Shutdown

# How long a stopping supervisor waits for the starts and stops its callers have in flight.
SETTLE_TIMEOUT = START_TIMEOUT


class _Roster:
    """What a dynamic supervisor's callers, its thread and its children's exit monitors all
    see of its children, under one lock that nothing else takes: how many there are (what
    `max_children` bounds), the temporary ones started by callers (their own thread starts
    and stops them, a monitor of their own hears their exit: the supervisor's thread never
    does), the callers' starts and stops in flight (the supervisor's end waits for them),
    and whether the supervisor has stopped taking children.
    """

    def __init__(self, max_children: int | None) -> None:
        self.lock = threading.Lock()
        self.settled = threading.Condition(self.lock)  # `in_flight` went down
        self.max_children = max_children
        self.count = 0
        self.by_caller: dict[pykka.ActorRef[Any], Child] = {}
        self.in_flight = 0
        self.closed = False
        self.swept = False  # the end took the callers' children: a later one is stopped by its own
        self.starts = itertools.count()  # every child's place in the start order

    def reserve(self) -> None:
        """Count one more child. Lock held.

        Raises:
            MaxChildrenReached: `max_children` are counted already.
        """
        if self.max_children is not None and self.count >= self.max_children:
            raise MaxChildrenReached(self.max_children)
        self.count += 1

    def release(self, ref: pykka.ActorRef[Any], child: Child) -> None:
        """Forget `child` (run as `ref`) and free its slot, if it is still the callers'. Lock
        held."""
        if self.by_caller.get(ref) is child:
            del self.by_caller[ref]
            self.count -= 1

    def settle(self, freed: int = 0) -> None:
        """A caller's start or stop is over (`freed` slots with it). Lock held."""
        self.in_flight -= 1
        self.count -= freed
        self.settled.notify_all()


class DynamicSupervisorActor(SupervisorCore, SupervisedActor):
    keeps_stopped_children = False

    def __init__(
        self,
        name: str,
        max_children: int | None,
        max_restarts: int,
        max_seconds: float,
        clock: Clock,
    ) -> None:
        super().__init__(name, max_restarts, max_seconds, clock)
        self.roster = _Roster(max_children)

    # -- children started on this thread (restartable ones) ------------------------------------

    def add(self, spec: ChildSpec) -> pykka.ActorRef[Any]:
        roster = self.roster
        with roster.lock:
            roster.reserve()
        child = Child(spec, order=next(roster.starts))
        try:
            ref = self.launch(child)
        except BaseException:
            with roster.lock:
                roster.count -= 1
            raise
        self.children.append(child)
        return ref

    def remove(self, ref: pykka.ActorRef[Any]) -> bool:
        child = next((c for c in self.children if c.ref is ref), None)
        if child is None or child.spec.restart == "temporary":  # those, only callers stop
            return False
        self.terminate(child)
        self.children.remove(child)
        with self.roster.lock:
            self.roster.count -= 1
        return True

    def dropped(self, child: Child, ref: pykka.ActorRef[Any] | None) -> None:
        with self.roster.lock:
            self.roster.count -= 1  # only restartable children are this thread's

    def every_child(self) -> list[Child]:
        """This thread's children and the callers' temporary ones that have started (a
        start still in `on_start` is not listed yet), in start order."""
        with self.roster.lock:
            theirs = [c for c in self.roster.by_caller.values() if c.watch is not None]
        return sorted([*self.children, *theirs], key=lambda c: c.order)

    # -- temporary children started and stopped by their callers -------------------------------

    def watch_for_caller(self, child: Child) -> None:
        """Hear of the exit of a temporary `child` its caller started, on the thread that
        sees it: it is forgotten and its slot freed (a crash is logged as this thread
        would). A child dead by now is heard of at once, on this caller's thread."""
        ref = child.ref
        assert ref is not None
        child.watch = watch(ref, _CallerChildExit(self.roster, child, self.log))
        self.log.debug("supervisor.child.started", child=child.spec.id, actor=str(ref))

    def terminate_all(self) -> None:
        # Only as the supervisor ends: from now on no caller adds a child; the starts and
        # stops callers have in flight finish first (bounded), then every child is stopped,
        # last started first.
        roster = self.roster
        with roster.lock:
            roster.closed = True
            if not roster.settled.wait_for(lambda: roster.in_flight == 0, SETTLE_TIMEOUT):
                self.log.warning("supervisor.children.unsettled", in_flight=roster.in_flight)
            # Taken from the callers: an exit monitor registered late finds nothing to free.
            theirs = list(roster.by_caller.values())
            roster.by_caller.clear()
            roster.count -= len(theirs)
            roster.swept = True
        mine = set(self.children)  # by identity (Child compares so)
        stopping: list[tuple[str, pykka.ActorRef[Any], Shutdown]] = []
        for child in sorted([*mine, *theirs], key=lambda c: c.order, reverse=True):
            ref = child.ref
            if ref is None:
                continue
            if child in mine:
                child.ref = None  # as `terminate` does
            self.unwatch(child)
            stopping.append((child.spec.id, ref, child.spec.shutdown))
        shutdown_children(stopping)  # in this order; loop actors in one hop per loop
        for child_id, _, _ in stopping:
            self.log.debug("supervisor.child.terminated", child=child_id)


class _CallerChildExit(Monitor):
    """The exit monitor of a temporary child its caller started: the child is forgotten and
    its slot freed, unless its caller or the supervisor's end stops it. Its own callback:
    one object per child for the cyclic collector to walk."""

    def __init__(self, roster: _Roster, child: Child, logger: LibraryLogger) -> None:
        super().__init__(None)
        self.roster, self.child, self.logger = roster, child, logger

    def exited(self, dead: pykka.ActorRef[Any], reason: ExitReason) -> None:
        roster, child = self.roster, self.child
        with roster.lock:
            if roster.by_caller.get(dead) is not child:  # its caller or the end stops it
                return
            roster.release(dead, child)
        self.logger.info(
            "supervisor.child.exited",
            child=child.spec.id,
            reason=str(reason),
            abnormal=reason.abnormal,
        )


class DynamicSupervisor(SupervisorHandle):
    """A supervisor whose children are started and stopped at run time (OTP's
    DynamicSupervisor).

    Each child is restarted alone according to its own restart type; a child that is not
    restarted is forgotten. Child ids need not be unique (a child is identified by its ref).
    More than `max_restarts` restarts within `max_seconds` stops every child and exits the
    supervisor abnormally.

    A `temporary` child (never restarted) is started and stopped on the caller's thread, and
    a monitor of its own forgets it when it exits, so `start_child` and `terminate_child`
    involve the supervisor's thread not at all. The guarantees stay: a child counts toward
    `max_children` from its start until it has stopped; the supervisor's end waits for the
    starts and stops its callers have in flight (up to `SETTLE_TIMEOUT`), then stops every
    child, last started first, so none outlives it (a start it overtook raises
    `SupervisorStopped`); `which_children` lists every child in start order.
    """

    @classmethod
    def start(
        cls,
        max_children: int | None = None,
        max_restarts: int = 3,
        max_seconds: float = 5.0,
        name: str | None = None,
        *,
        clock: Clock = time.monotonic,
    ) -> DynamicSupervisor:
        """Start an empty dynamic supervisor.

        Raises:
            ValueError: `max_children < 0`, `max_restarts < 0` or `max_seconds <= 0`.
        """
        if max_children is not None and (
            isinstance(max_children, bool) or not isinstance(max_children, int) or max_children < 0
        ):
            raise ValueError(
                f"invalid max_children {max_children!r} (expected an int >= 0 or None)"
            )
        check_intensity(max_restarts, max_seconds)
        label = name or "dynamic-supervisor"
        return cls(
            DynamicSupervisorActor.start(label, max_children, max_restarts, max_seconds, clock)
        )

    def _actor(self) -> DynamicSupervisorActor:
        actor = self._actor_obj
        assert isinstance(actor, DynamicSupervisorActor)
        return actor

    def start_child(self, spec: ChildSpec) -> pykka.ActorRef[Any]:
        """Start a child from `spec` and supervise it; returns its ref.

        Raises:
            MaxChildrenReached: `max_children` children are already supervised.
            ChildStartError: the start function failed.
            SupervisorStopped: the supervisor has stopped.
            ValueError: `spec` is not a ChildSpec.
        """
        if not isinstance(spec, ChildSpec):
            raise ValueError(f"invalid child {spec!r} (expected a ChildSpec)")
        actor = self._actor()
        if spec.restart != "temporary":
            return self._call(lambda: actor.add(spec), timeout=None)
        return self._start_here(actor, Child(spec))

    def _start_here(self, actor: DynamicSupervisorActor, child: Child) -> pykka.ActorRef[Any]:
        spec, roster = child.spec, actor.roster
        with roster.lock:
            if roster.closed or not self._ref.is_alive():  # ended, or killed and not ended yet
                raise self._stopped()
            roster.reserve()
            roster.in_flight += 1
            child.order = next(roster.starts)
        ref: pykka.ActorRef[Any] | None = None
        late = False
        try:
            ref = begin_child(spec)
        finally:
            with roster.lock:
                late = ref is not None and roster.swept  # the end gave up waiting for it
                if ref is None or late:
                    roster.settle(freed=1)
                else:  # from here the supervisor's end stops it, whatever happens to this call
                    child.ref = ref
                    roster.by_caller[ref] = child
                    roster.settle()
        if late:
            assert ref is not None
            shutdown_child(spec.id, ref, spec.shutdown)
            raise self._stopped()
        try:
            await_started(spec, ref)
        except BaseException as exc:
            with roster.lock:
                roster.release(ref, child)
                overtaken = roster.closed  # the end stopped it while its on_start still ran
            if overtaken and isinstance(exc, Exception):
                raise self._stopped() from exc
            raise
        with roster.lock:
            if roster.closed:  # the supervisor's end stopped it, or is stopping it
                raise self._stopped()
            if roster.by_caller.get(ref) is not child:  # another caller terminated it already
                return ref
            # Killed while its thread was busy: its end comes only when that thread is free.
            killed = not self._ref.is_alive()
            if killed:
                roster.release(ref, child)
        if killed:
            shutdown_child(spec.id, ref, spec.shutdown)
            raise self._stopped()
        # Outside the lock: a child that is dead already is heard of at once, here.
        actor.watch_for_caller(child)
        with roster.lock:
            overtaken = roster.closed  # the end took it between the check above and now
        if overtaken:
            raise self._stopped()
        return ref

    def terminate_child(self, ref: pykka.ActorRef[Any]) -> bool:
        """Stop the child behind `ref` within its shutdown and forget it.

        Returns False when `ref` is not (or no longer) a child of this supervisor, or has
        exited already (the supervisor forgets it as it hears of the exit).

        Raises:
            SupervisorStopped: the supervisor has stopped (it stopped its children).
        """
        stopped = self.terminate_temporary(ref)
        if stopped is not None:
            return stopped
        actor = self._actor()
        return self._call(lambda: actor.remove(ref), timeout=None)

    def terminate_temporary(self, ref: pykka.ActorRef[Any]) -> bool | None:
        """`terminate_child` of a temporary child its caller started, on the calling thread
        with no call to the supervisor's thread: on the event loop of an `AsyncioActor` child
        the child stops in place (its `on_stop` runs now), so a coroutine there can stop it
        without blocking its loop. None when `ref` is no such child (then `terminate_child`
        asks the supervisor's thread).

        Raises:
            SupervisorStopped: as `terminate_child`.
        """
        actor = self._actor()
        roster = actor.roster
        with roster.lock:
            if roster.closed:
                raise self._stopped()
            child = roster.by_caller.get(ref)
            if child is None:
                return None
            if not ref.is_alive():
                return False
            del roster.by_caller[ref]
            roster.in_flight += 1
        try:
            actor.unwatch(child)  # its exit is no crash
            shutdown_child(child.spec.id, ref, child.spec.shutdown)
            actor.log.debug("supervisor.child.terminated", child=child.spec.id)
        finally:
            with roster.lock:
                roster.settle(freed=1)  # its slot is free once it has stopped
        return True
