"""DynamicSupervisor: children started on demand, each restarted alone (one_for_one)."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Any

import pykka

from supervisors._core import Child, SupervisorCore, SupervisorHandle
from supervisors._errors import MaxChildrenReached, SupervisorStopped
from supervisors._intensity import Clock, check_intensity
from supervisors._shutdown import START_TIMEOUT, await_started, begin_child, shutdown_child
from supervisors._spec import ChildSpec

# How long a stopping supervisor waits for the starts and stops its callers have in flight.
SETTLE_TIMEOUT = START_TIMEOUT


class _Roster:
    """What a dynamic supervisor's callers and its thread both see of its children, under
    one lock that nothing else takes: how many there are (what `max_children` bounds), the
    temporary ones started by callers (their own thread starts and stops them; the
    supervisor only watches them), the callers' starts and stops in flight (the supervisor's
    end waits for them), and whether the supervisor has stopped taking children.
    """

    def __init__(self, max_children: int | None) -> None:
        self.lock = threading.Lock()
        self.settled = threading.Condition(self.lock)  # `in_flight` went down
        self.max_children = max_children
        self.count = 0
        self.by_caller: dict[pykka.ActorRef[Any], Child] = {}
        self.in_flight = 0
        self.closed = False

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


@dataclass(frozen=True)
class _Adopt:
    """A temporary child its caller started: the supervisor watches it from now on."""

    child: Child


@dataclass(frozen=True)
class _Forget:
    """A temporary child its caller is stopping: the supervisor stops watching it."""

    child: Child


class DynamicSupervisorActor(SupervisorCore):
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

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _Adopt):
            self._adopt(message.child)
            return None
        if isinstance(message, _Forget):
            self._forget(message.child)
            return None
        return super().on_receive(message)

    # -- children started on this thread (restartable ones) ------------------------------------

    def add(self, spec: ChildSpec) -> pykka.ActorRef[Any]:
        roster = self.roster
        with roster.lock:
            roster.reserve()
        child = Child(spec)
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

    # -- temporary children started and stopped by their callers -------------------------------

    def _adopt(self, child: Child) -> None:
        ref = child.ref
        with self.roster.lock:
            if ref is None or self.roster.by_caller.get(ref) is not child:  # its caller stopped it
                return
        self.children.append(child)
        self.watch(child)  # a child dead by now is reported at once, as ChildExited

    def _forget(self, child: Child) -> None:
        if child in self.children:
            self.unwatch(child)
            self.children.remove(child)
            self.log.debug("supervisor.child.terminated", child=child.spec.id)

    def dropped(self, child: Child, ref: pykka.ActorRef[Any] | None) -> None:
        roster = self.roster
        with roster.lock:
            if child.spec.restart != "temporary":
                roster.count -= 1
            elif ref is not None:
                roster.release(ref, child)

    def terminate_all(self) -> None:
        # Only as the supervisor ends: from now on no caller adds a child; the starts and
        # stops callers have in flight finish first (bounded), and the children they started
        # that are not watched yet are stopped with the rest, last started first.
        roster = self.roster
        with roster.lock:
            roster.closed = True
            if not roster.settled.wait_for(lambda: roster.in_flight == 0, SETTLE_TIMEOUT):
                self.log.warning("supervisor.children.unsettled", in_flight=roster.in_flight)
            unwatched = [c for c in roster.by_caller.values() if c not in self.children]
        for child in reversed(unwatched):
            if child.ref is not None:
                shutdown_child(child.spec.id, child.ref, child.spec.shutdown)
        super().terminate_all()


class DynamicSupervisor(SupervisorHandle):
    """A supervisor whose children are started and stopped at run time (OTP's
    DynamicSupervisor).

    Each child is restarted alone according to its own restart type; a child that is not
    restarted is forgotten. Child ids need not be unique (a child is identified by its ref).
    More than `max_restarts` restarts within `max_seconds` stops every child and exits the
    supervisor abnormally.

    A `temporary` child (never restarted) is started and stopped on the caller's thread and
    only watched by the supervisor's, so `start_child` and `terminate_child` cost no round
    trip to the supervisor. The guarantees stay: a child counts toward `max_children` from
    its start until it has stopped; the supervisor's end waits for the starts and stops its
    callers have in flight (up to `SETTLE_TIMEOUT`), then stops every child it had, so none
    outlives it (a start it overtook raises `SupervisorStopped`).
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
        return self._start_here(actor.roster, Child(spec))

    def _start_here(self, roster: _Roster, child: Child) -> pykka.ActorRef[Any]:
        spec = child.spec
        with roster.lock:
            if roster.closed:
                raise SupervisorStopped(f"supervisor {self._ref} is not running")
            roster.reserve()
            roster.in_flight += 1
        ref: pykka.ActorRef[Any] | None = None
        try:
            ref = begin_child(spec)
        finally:
            with roster.lock:
                if ref is None:
                    roster.settle(freed=1)
                else:  # from here the supervisor's end stops it, whatever happens to this call
                    child.ref = ref
                    roster.by_caller[ref] = child
                    roster.settle()
        try:
            await_started(spec, ref)
        except BaseException:
            with roster.lock:
                roster.release(ref, child)
            raise
        with roster.lock:
            if roster.by_caller.get(ref) is not child:  # another caller terminated it already
                return ref
            if roster.closed:  # the supervisor's end stopped it, or is stopping it
                raise SupervisorStopped(f"supervisor {self._ref} is not running")
            try:
                self._ref.tell(_Adopt(child))
                return ref
            except pykka.ActorDeadError:  # gone without its end (yet): stop the child here
                roster.release(ref, child)
        shutdown_child(spec.id, ref, spec.shutdown)
        raise SupervisorStopped(f"supervisor {self._ref} is not running")

    def terminate_child(self, ref: pykka.ActorRef[Any]) -> bool:
        """Stop the child behind `ref` within its shutdown and forget it.

        Returns False when `ref` is not (or no longer) a child of this supervisor, or has
        exited already (the supervisor forgets it as it hears of the exit).

        Raises:
            SupervisorStopped: the supervisor has stopped (it stopped its children).
        """
        actor = self._actor()
        roster = actor.roster
        with roster.lock:
            if roster.closed:
                raise SupervisorStopped(f"supervisor {self._ref} is not running")
            child = roster.by_caller.get(ref)
            if child is not None:
                if not ref.is_alive():
                    return False
                del roster.by_caller[ref]
                roster.in_flight += 1
        if child is None:
            return self._call(lambda: actor.remove(ref), timeout=None)
        try:
            # Told before the stop, so its exit is no news to the supervisor; a supervisor
            # gone already stopped its children as it ended.
            with contextlib.suppress(pykka.ActorDeadError):
                self._ref.tell(_Forget(child))
            shutdown_child(child.spec.id, ref, child.spec.shutdown)
        finally:
            with roster.lock:
                roster.settle(freed=1)  # its slot is free once it has stopped
        return True
