"""The machinery shared by Supervisor and DynamicSupervisor: children, exits, restarts, give-up."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import pykka
from opentelemetry import metrics

from supervisors._actor import ExitReason, Monitor, ReportsExit, actor_of, monitor
from supervisors._asyncio_actor import AsyncioActor
from supervisors._errors import ChildStartError, SupervisorStopped
from supervisors._handle import ActorHandle
from supervisors._intensity import Clock, RestartIntensity
from supervisors._log import get_logger
from supervisors._shutdown import shutdown_child, start_child
from supervisors._spec import ChildCounts, ChildInfo, ChildSpec

log = get_logger(__name__)

# A no-op until the application installs an OpenTelemetry SDK.
RESTARTS = metrics.get_meter("supervisors").create_counter(
    "supervisor.restarts", unit="{restart}", description="Children restarted, by supervisor"
)

# How long a handle waits for its supervisor to answer a call that involves no child start
# or shutdown; calls that do are bounded by the children's own start and shutdown times.
CALL_TIMEOUT = 30.0

T = TypeVar("T")


@dataclass(eq=False)
class Child:
    """One supervised child: its spec and, while it runs, its ref and exit monitor."""

    spec: ChildSpec
    ref: pykka.ActorRef[Any] | None = None
    watch: Monitor | None = field(default=None, repr=False)
    order: int = 0  # its place in its supervisor's start order (a dynamic one's)

    def info(self) -> ChildInfo:
        alive = self.ref is not None and self.ref.is_alive()
        return ChildInfo(
            id=self.spec.id,
            ref=self.ref,
            restart=self.spec.restart,
            type=self.spec.type,
            alive=alive,
        )


@dataclass(frozen=True)
class ChildExited:
    """Sent to a supervisor by the monitor of one of its children."""

    ref: pykka.ActorRef[Any]
    reason: ExitReason


@dataclass(frozen=True)
class RetryRestart:
    """Sent by a supervisor to itself to try again children whose restart failed."""

    group: list[Child]


@dataclass(frozen=True)
class Call:
    """A synchronous request from a handle to its supervisor actor."""

    fn: Callable[[], Any]


def should_restart(restart: str, reason: ExitReason) -> bool:
    """OTP: permanent always, transient after an abnormal exit, temporary never."""
    if restart == "permanent":
        return True
    if restart == "transient":
        return reason.abnormal
    return False


class SupervisorCore(ReportsExit):
    """A supervisor actor: owns its children, hears their exits, restarts or gives up.

    A mixin placed before the actor kind it runs as: a `SupervisedActor` (a thread of its
    own) or an `AsyncioActor` (handled on an event loop, with no thread). All state is
    touched only from that actor's context. Subclasses decide which children a restart
    involves (`restart_group`).
    """

    log: Any

    # OTP: a static supervisor keeps the spec of a (transient) child that ended normally and is
    # not restarted; a dynamic one deletes every child it does not restart.
    keeps_stopped_children = True

    def __init__(self, name: str, max_restarts: int, max_seconds: float, clock: Clock) -> None:
        super().__init__()  # the actor kind's
        self.name = name
        self.children: list[Child] = []
        self.intensity = RestartIntensity(max_restarts, max_seconds, clock)
        self.log = log.bind(supervisor=name)

    # -- strategy hook --------------------------------------------------------------------------

    def restart_group(self, child: Child) -> list[Child]:
        """The children, in start order, that a restart of `child` involves (one_for_one)."""
        return [child]

    # -- messages -------------------------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, ChildExited):
            self._child_exited(message.ref, message.reason)
            return None
        if isinstance(message, Call):
            return message.fn()
        if isinstance(message, RetryRestart):
            self._restart_all([c for c in message.group if c.ref is None])
            return None
        return super().on_receive(message)  # type: ignore[misc]  # the actor kind's

    def dropped(self, child: Child, ref: pykka.ActorRef[Any] | None) -> None:
        """`child` (last run as `ref`) left `children` for good after an exit."""

    def every_child(self) -> list[Child]:
        """Every child, in start order (this thread's `children`, unless a subclass has
        children of its callers' too)."""
        return self.children

    # -- starting and stopping children -----------------------------------------------------------

    def launch(self, child: Child) -> pykka.ActorRef[Any]:
        """Start `child` and watch it. Raises ChildStartError."""
        child.ref = ref = start_child(child.spec)
        self.watch(child)
        return ref

    def watch(self, child: Child) -> None:
        """Hear of the exit of `child` (started, its `ref` set) as `ChildExited`."""
        ref = child.ref
        assert ref is not None
        me = self.actor_ref

        def exited(dead: pykka.ActorRef[Any], reason: ExitReason) -> None:
            # If the supervisor is gone, it already shut its children down.
            with contextlib.suppress(pykka.ActorDeadError):
                me.tell(ChildExited(dead, reason))

        child.watch = monitor(ref, exited)
        self.log.debug("supervisor.child.started", child=child.spec.id, actor=str(ref))

    def unwatch(self, child: Child) -> None:
        """Hear no more of the exit of `child` (`watch` undone)."""
        if child.watch is not None:
            child.watch.cancel()
            child.watch = None

    def terminate(self, child: Child) -> None:
        """Stop `child` within its shutdown time; its exit is not treated as a crash."""
        ref, child.ref = child.ref, None
        self.unwatch(child)
        if ref is not None:
            shutdown_child(child.spec.id, ref, child.spec.shutdown)
            self.log.debug("supervisor.child.terminated", child=child.spec.id)

    def terminate_all(self) -> None:
        """Stop every running child in reverse start order."""
        for child in reversed(self.children):
            if child.ref is not None:
                self.terminate(child)

    def on_stop(self) -> None:
        self.terminate_all()

    def on_exit(self, reason: ExitReason) -> None:
        # Children never outlive their supervisor, however it exits (Erlang links).
        self.terminate_all()

    # -- exits and restarts ---------------------------------------------------------------------

    def _child_exited(self, ref: pykka.ActorRef[Any], reason: ExitReason) -> None:
        child = next((c for c in self.children if c.ref is ref), None)
        if child is None:
            return  # a child we already terminated or replaced
        child.ref, child.watch = None, None
        self.log.info(
            "supervisor.child.exited",
            child=child.spec.id,
            reason=str(reason),
            abnormal=reason.abnormal,
        )
        if not should_restart(child.spec.restart, reason):
            if child.spec.restart == "temporary" or not self.keeps_stopped_children:
                self.children.remove(child)
                self.dropped(child, ref)
            return
        if not self.intensity.record():
            self.give_up(child)
            return
        group = self.restart_group(child)
        for other in reversed(group):
            if other is not child and other.ref is not None:
                self.terminate(other)
        # Temporary siblings stopped by the strategy are deleted, not restarted (OTP).
        for other in group:
            if other is not child and other.spec.restart == "temporary":
                self.children.remove(other)
                self.dropped(other, None)
        self._restart_all([c for c in group if c in self.children])

    def _restart_all(self, group: list[Child]) -> None:
        """Start `group` in order. A failed start counts as another restart; the rest of the
        group is retried through the mailbox (as OTP's `try_again`), so calls and exits that
        arrived meanwhile are served between attempts."""
        for position, child in enumerate(group):
            if child not in self.children:
                continue  # deleted since the retry was queued
            try:
                self.launch(child)
            except ChildStartError as exc:
                self.log.error(
                    "supervisor.child.restart_failed", child=child.spec.id, error=str(exc)
                )
                if not self.intensity.record():
                    self.give_up(child)
                    return
                self.actor_ref.tell(RetryRestart(group[position:]))
                return
            self.log.info("supervisor.child.restarted", child=child.spec.id)
            RESTARTS.add(1, {"supervisor": self.name, "child": child.spec.id})

    def give_up(self, child: Child) -> None:
        """Restart intensity exceeded: stop every child and exit abnormally."""
        self.log.error(
            "supervisor.gave_up",
            child=child.spec.id,
            max_restarts=self.intensity.max_restarts,
            max_seconds=self.intensity.max_seconds,
        )
        self.terminate_all()
        self._exit_abnormally(
            ExitReason("crash", f"shutdown: reached_max_restart_intensity (last: {child.spec.id})")
        )


class SupervisorHandle(ActorHandle):
    """The caller-side face of a supervisor actor: synchronous calls with deadlines."""

    def __init__(self, ref: pykka.ActorRef[Any]) -> None:
        actor = actor_of(ref)
        if not isinstance(actor, SupervisorCore):
            raise TypeError(f"{ref} is not a running supervisor")
        super().__init__(ref)
        self._actor_obj: SupervisorCore = actor  # a strong reference: pykka refs hold actors weakly

    def _call(self, fn: Callable[[], T], timeout: float | None = CALL_TIMEOUT) -> T:
        actor = self._actor_obj
        try:
            if isinstance(actor, AsyncioActor) and actor.on_loop_thread():
                # On its own loop: an answer cannot be waited for, the call runs now.
                return cast(T, actor.handle_now(Call(fn)))
            result = cast(T, self._ref.ask(Call(fn), timeout=timeout))
        except pykka.ActorDeadError as exc:
            raise self._stopped() from exc
        except pykka.Timeout as exc:
            raise TimeoutError(f"supervisor {self._ref} did not answer within {timeout}s") from exc
        return result

    def _stopped(self) -> SupervisorStopped:
        """The error of a call to this supervisor once it has stopped."""
        return SupervisorStopped(f"supervisor {self._ref} is not running")

    def _core(self) -> SupervisorCore:
        return self._actor_obj

    def which_children(self) -> list[ChildInfo]:
        """One ChildInfo per child, in start order."""
        core = self._core()
        return self._call(lambda: [c.info() for c in core.every_child()])

    def count_children(self) -> ChildCounts:
        """How many specs, running children, supervisors and workers."""
        core = self._core()

        def count() -> ChildCounts:
            kids = core.every_child()
            return ChildCounts(
                specs=len(kids),
                active=sum(1 for c in kids if c.ref is not None and c.ref.is_alive()),
                supervisors=sum(1 for c in kids if c.spec.type == "supervisor"),
                workers=sum(1 for c in kids if c.spec.type == "worker"),
            )

        return self._call(count)

    def stop(self, timeout: float | None = None) -> None:
        """Stop the children in reverse start order, each within its shutdown, then the
        supervisor. Returns at once if it is not running.

        Raises:
            TimeoutError: it did not stop within `timeout` seconds (None waits for the
                children's own shutdown bounds).
        """
        actor = self._actor_obj
        if isinstance(actor, AsyncioActor) and actor.on_loop_thread():
            actor.stop_now()  # on its own loop: its children stop at once, nothing waits
            return
        try:
            self._ref.stop(block=True, timeout=timeout)
        except pykka.Timeout as exc:
            raise TimeoutError(f"supervisor {self._ref} did not stop within {timeout}s") from exc
        except pykka.ActorDeadError:
            pass

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._core().name} alive={self.alive}>"
