"""SupervisedActor, exit reasons, monitors and kill: how an actor's exit reaches its supervisor."""

from __future__ import annotations

import itertools
import queue
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, TypeVar

import pykka
from pykka._envelope import Envelope

from supervisors._describe import describe
from supervisors._log import get_logger

log = get_logger(__name__)

ExitKind = Literal["normal", "crash", "killed", "noproc"]


@dataclass(frozen=True)
class ExitReason:
    """Why an actor exited.

    `kind` is `"normal"` for a normal `stop()`, `"crash"` for an exception that escaped a
    `tell` handler, `on_start`, `on_stop` or `on_failure`, `"killed"` for `kill()`, and
    `"noproc"` when the actor is gone and how it ended was never recorded.
    """

    kind: ExitKind
    detail: str = ""
    exception: BaseException | None = None

    @property
    def abnormal(self) -> bool:
        """True for every exit except a normal stop (Erlang: reason other than normal)."""
        return self.kind != "normal"

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}" if self.detail else self.kind


NORMAL = ExitReason("normal")

ExitCallback = Callable[[pykka.ActorRef[Any], ExitReason], None]


class Monitor:
    """A one-shot subscription to an actor's exit; `cancel()` it when no longer interested.

    `monitor(ref, callback)` makes one that calls `callback`. A subclass that overrides
    `exited` is its own callback, started with `watch(ref, subscription)`: one object per
    subscription where a callback and its Monitor are two.
    """

    _ids = itertools.count()

    def __init__(self, actor: ReportsExit | None, callback: ExitCallback | None = None) -> None:
        self._actor = actor
        self.callback = callback
        self.id = next(self._ids)

    def exited(self, ref: pykka.ActorRef[Any], reason: ExitReason) -> None:
        """Called once, when the watched actor exits (on the thread that saw the exit)."""
        if self.callback is not None:
            self.callback(ref, reason)

    def cancel(self) -> None:
        """Stop listening; the callback is not called after `cancel` returns (unless running)."""
        actor, self._actor = self._actor, None
        if actor is not None:
            actor._remove_monitor(self)


class ReportsExit:
    """What every supervisable actor kind shares: its exit, with its reason, reaches its
    monitors exactly once (`SupervisedActor` on a thread, `AsyncioActor` on an event loop).

    Not public: a mixin placed before the pykka actor class it extends. The exit bookkeeping
    is behind a lock because `kill` and `monitor` may come from any thread.
    """

    actor_ref: pykka.ActorRef[Any]
    actor_stopped: threading.Event
    actor_inbox: Any

    def _init_exit_reporting(self) -> None:
        # A lock of its own, and reentrant: a collection may start inside a locked section (an
        # allocation there on 3.11, any step on 3.12+) and run finalizers on this thread that
        # cancel monitors or kill actors. One lock for every actor deadlocked on any such
        # finalizer; a plain lock per actor still did on one that touches this same actor.
        # Each section leaves the bookkeeping whole before it allocates, so a finalizer that
        # re-enters sees a consistent state.
        self._exit_lock = threading.RLock()
        self._exit_reason: ExitReason | None = None
        self._exit_fired = False
        self._monitors: dict[int, Monitor] | None = None  # made by the first monitor

    # -- hooks -------------------------------------------------------------------------------

    def wait_initialized(self, timeout: float | None = None) -> bool:
        """Block until `on_start` has returned or failed; False if `timeout` passed first."""
        raise NotImplementedError

    def on_exit(self, reason: ExitReason) -> None:
        """Run in the actor's own context (its thread, or its event loop) when it ends, after
        its monitors were told.

        Override to release resources that must go whatever the exit was (a supervisor
        shuts its children down here). Exceptions are logged and ignored.
        """

    def _wake(self) -> None:
        """Make the actor's loop notice that it was stopped (a message that does nothing)."""
        self.actor_inbox.put(Envelope(_Wake()))

    # -- monitor bookkeeping -------------------------------------------------------------------

    def _add_monitor(self, monitor: Monitor) -> None:
        monitor._actor = self
        with self._exit_lock:
            if not self._exit_fired:
                if self._monitors is None:
                    monitors: dict[int, Monitor] = {}
                    if self._monitors is None:  # else a finalizer run by `{}` made one
                        self._monitors = monitors
                self._monitors[monitor.id] = monitor
                return
            reason = self._exit_reason or NORMAL
        monitor._actor = None
        _notify(monitor, self.actor_ref, reason)

    def _remove_monitor(self, monitor: Monitor) -> None:
        with self._exit_lock:
            if self._monitors is not None:
                self._monitors.pop(monitor.id, None)

    def _record_reason(self, reason: ExitReason) -> None:
        with self._exit_lock:
            if self._exit_reason is None:
                self._exit_reason = reason

    def _fire_exit(self) -> ExitReason:
        with self._exit_lock:
            if self._exit_reason is None:
                self._exit_reason = NORMAL
            reason = self._exit_reason
            if self._exit_fired:
                return reason
            self._exit_fired = True
            # The ref outlives the actor object (pykka refs hold it weakly): keep the reason there.
            vars(self.actor_ref)[_REF_REASON] = reason
            monitors = list(self._monitors.values()) if self._monitors else []
            self._monitors = None
        for monitor in monitors:
            monitor._actor = None  # fired: a monitor its owner keeps does not keep the actor
            _notify(monitor, self.actor_ref, reason)
        return reason

    def _exit_abnormally(self, reason: ExitReason) -> None:
        """Stop taking messages at once and report `reason`; safe from any thread."""
        self._record_reason(reason)
        pykka.ActorRegistry.unregister(self.actor_ref)
        self.actor_stopped.set()
        self._wake()
        self._fire_exit()

    def _handle_envelope(self, envelope: Envelope[Any]) -> None:
        # What pykka 4.x does per message, but for a BaseException, which `_handle_receive`
        # has already turned into this actor's crash (pykka would stop every actor).
        try:
            response = self._handle_receive(envelope.message)
        except Exception:
            if envelope.reply_to is not None:
                envelope.reply_to.set_exception()  # the caller's to handle: not logged here
            else:
                self._handle_failure(*sys.exc_info())
                try:
                    self.on_failure(*sys.exc_info())
                except Exception:
                    self._handle_failure(*sys.exc_info())
            return
        if envelope.reply_to is not None:
            envelope.reply_to.set(response)

    def _handle_receive(self, message: Any) -> Any:
        if isinstance(message, _Wake):
            return None
        try:
            return super()._handle_receive(message)  # type: ignore[misc]  # pykka.Actor's
        except Exception:
            raise
        except BaseException as exc:
            # Crash this actor alone; handing pykka a BaseException would stop every actor.
            self._exit_abnormally(crash_reason(exc))
            raise _EscapedBaseException(repr(exc)) from exc

    def _handle_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exception_value is not None:
            self._record_reason(crash_reason(exception_value))
        super()._handle_failure(exception_type, exception_value, traceback)  # type: ignore[misc]

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """pykka's hook, called after a `tell` handler raised (the actor then exits)."""

    def _run_on_exit(self, reason: ExitReason) -> None:
        try:
            self.on_exit(reason)
        except Exception:
            log.exception("actor.on_exit.failed", actor=str(self))


class SupervisedActor(ReportsExit, pykka.ThreadingActor):
    """A pykka ThreadingActor whose every exit, with its reason, reaches its monitors.

    Guarantees:
    - Monitors are called exactly once per actor, after the actor stopped taking messages
      (for `kill`, at once from the killing thread; otherwise from the actor's own thread just
      before it exits), with an `ExitReason`.
    - A `BaseException` (SystemExit, KeyboardInterrupt, ...) escaping a handler crashes this
      actor only; pykka's default of stopping every actor in the process is not applied.
    - `on_exit(reason)` runs in the actor's thread as the thread ends, whatever the reason.

    Threads are daemon threads so that a forgotten actor never hangs interpreter exit.
    """

    use_daemon_thread = True

    @staticmethod
    def _create_actor_inbox() -> queue.SimpleQueue[Envelope[Any]]:
        # pykka's inbox is a queue.Queue: a lock, three Conditions and their deques per actor
        # and a Python-level put per message. An inbox needs only put, get and empty.
        return queue.SimpleQueue()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._initialized = threading.Event()
        self._init_exit_reporting()

    def wait_initialized(self, timeout: float | None = None) -> bool:
        """Block until `on_start` has returned or failed; False if `timeout` passed first."""
        return self._initialized.wait(timeout)

    # -- pykka internals (pinned to pykka 4.x) -----------------------------------------------

    def _actor_loop(self) -> None:
        try:
            try:
                self.on_start()
            except BaseException:  # an on_start failure of any kind is a crash
                self._handle_failure(*sys.exc_info())
            self._initialized.set()
            self._actor_loop_running()
            self._actor_loop_teardown()
        finally:
            self._initialized.set()
            self._run_on_exit(self._fire_exit())

    def _actor_loop_running(self) -> None:
        # pykka's loop keeps its last envelope and reply in locals while it waits for the next
        # message: an idle actor would keep what its last message carried (an agent: its last
        # run's facts) alive. Handled in a call of its own, nothing of a message outlives it.
        while not self.actor_stopped.is_set():
            self._handle_envelope(self.actor_inbox.get())


class _Wake:
    """An inbox message that only wakes the actor loop so it sees that it was stopped."""


class _EscapedBaseException(Exception):
    """Carries a BaseException out of a handler as an ordinary exception."""


def crash_reason(exc: BaseException) -> ExitReason:
    """The exit reason of an actor that crashed with `exc`."""
    cause = exc.__cause__ if isinstance(exc, _EscapedBaseException) else None
    original = cause if cause is not None else exc
    return ExitReason("crash", describe(original), original)


def _notify(monitor: Monitor, ref: pykka.ActorRef[Any], reason: ExitReason) -> None:
    try:
        monitor.exited(ref, reason)
    except Exception:
        log.exception("actor.monitor.callback_failed", actor=str(ref))


_REF_REASON = "_supervisors_exit_reason"


def _reason_on_ref(ref: pykka.ActorRef[Any]) -> ExitReason:
    """The reason recorded on `ref` when its actor exited, or `noproc` if none was."""
    reason = vars(ref).get(_REF_REASON)
    return reason if isinstance(reason, ExitReason) else ExitReason("noproc")


def actor_of(ref: pykka.ActorRef[Any]) -> pykka.Actor | None:
    """The actor object behind `ref`, or None once it was garbage-collected."""
    return ref._actor_weakref()


def reports_exit(actor_class: type[Any]) -> bool:
    """True for the actor kinds whose exits a supervisor hears of (`SupervisedActor`,
    `AsyncioActor` and their subclasses)."""
    return issubclass(actor_class, ReportsExit)


def _supervised(ref: pykka.ActorRef[Any]) -> ReportsExit | None:
    if not reports_exit(ref.actor_class):
        raise TypeError(
            f"{ref} is a {ref.actor_class.__name__}, not a SupervisedActor or an AsyncioActor: "
            "only those report their exits"
        )
    actor = actor_of(ref)
    assert actor is None or isinstance(actor, ReportsExit)
    return actor


def monitor(ref: pykka.ActorRef[Any], callback: ExitCallback) -> Monitor:
    """Call `callback(ref, reason)` exactly once when the actor behind `ref` exits.

    The callback runs in whichever thread observed the exit (the actor's own, or the caller
    of `kill`), so it must be quick and must not block; if the actor is already dead it is
    called at once, in the caller's thread, with the recorded reason (or `noproc`).

    Raises:
        TypeError: `ref` is not the ref of a `SupervisedActor` or an `AsyncioActor`.
    """
    return watch(ref, Monitor(None, callback))


M = TypeVar("M", bound=Monitor)


def watch(ref: pykka.ActorRef[Any], subscription: M) -> M:
    """`monitor` for a `Monitor` subclass that overrides `exited`: its `exited(ref, reason)`
    is called exactly once when the actor behind `ref` exits, as `monitor` calls a callback
    (also at once, for an actor already dead). Returns `subscription`, to `cancel()`.

    Raises:
        TypeError: `ref` is not the ref of a `SupervisedActor` or an `AsyncioActor`.
        ValueError: `subscription` watches an actor already (one actor per subscription).
    """
    if subscription._actor is not None:
        raise ValueError(f"{subscription!r} watches an actor already: make one per actor")
    actor = _supervised(ref)
    if actor is None:  # long dead and collected
        _notify(subscription, ref, _reason_on_ref(ref))
    else:
        actor._add_monitor(subscription)
    return subscription


def kill(ref: pykka.ActorRef[Any], reason: str = "killed") -> None:
    """Make an actor exit abnormally at once (Erlang's `exit(Pid, kill)`).

    The actor takes no further message; its monitors hear `ExitReason("killed", reason)`
    before `kill` returns. A handler that is running when the kill arrives cannot be
    interrupted (threads cannot be), so that thread is abandoned and ends when it returns.
    `on_stop` is not called. Killing a dead actor does nothing.

    Raises:
        TypeError: `ref` is not the ref of a `SupervisedActor` or an `AsyncioActor`.
    """
    actor = _supervised(ref)
    if actor is None or (not ref.is_alive() and actor._exit_fired):
        return
    log.info("actor.killed", actor=str(ref), reason=reason)
    actor._exit_abnormally(ExitReason("killed", reason))


def exit_reason(ref: pykka.ActorRef[Any]) -> ExitReason | None:
    """The reason a SupervisedActor or an AsyncioActor exited, or None while it is alive."""
    actor = _supervised(ref)
    if actor is None:  # dead and collected
        return _reason_on_ref(ref)
    with actor._exit_lock:
        return actor._exit_reason if actor._exit_fired else None
