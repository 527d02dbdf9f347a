"""Starting one child from its spec and shutting it down within its `shutdown` time."""

from __future__ import annotations

import contextlib
from concurrent.futures import Future
from typing import Any

import pykka
from pykka import messages as pykka_messages

from supervisors._actor import ReportsExit, actor_of, exit_reason, kill, reports_exit
from supervisors._asyncio_actor import AsyncioActor
from supervisors._describe import describe
from supervisors._errors import ChildStartError
from supervisors._log import get_logger
from supervisors._spec import ChildSpec, Shutdown

log = get_logger(__name__)

# How long a supervisor waits for a new child's on_start before giving up on it.
START_TIMEOUT = 30.0


def start_child(spec: ChildSpec) -> pykka.ActorRef[Any]:
    """Call `spec.start()`, wait for the child's `on_start` to finish (OTP's `start_link`
    waits for `init`), and check that it is a live SupervisedActor or AsyncioActor.

    A child whose `on_start` calls back into its own supervisor synchronously deadlocks until
    `START_TIMEOUT`, as in OTP.

    Raises:
        ChildStartError: the start function raised or returned something else, or `on_start`
            failed or did not finish within `START_TIMEOUT`; names the child.
    """
    return await_started(spec, begin_child(spec))


def begin_child(spec: ChildSpec) -> pykka.ActorRef[Any]:
    """The first half of `start_child`: call `spec.start()` and check what it returned (its
    `on_start` may still be running).

    Raises:
        ChildStartError: as `start_child`.
    """
    try:
        ref = spec.start()
    except Exception as exc:
        raise ChildStartError(spec.id, describe(exc)) from exc
    if not isinstance(ref, pykka.ActorRef):
        raise ChildStartError(spec.id, f"start returned {ref!r}, not a pykka.ActorRef")
    if not reports_exit(ref.actor_class):
        ref.stop(block=False)
        raise ChildStartError(
            spec.id,
            f"{ref.actor_class.__name__} is not a supervisors.SupervisedActor "
            "or supervisors.AsyncioActor",
        )
    return ref


def await_started(spec: ChildSpec, ref: pykka.ActorRef[Any]) -> pykka.ActorRef[Any]:
    """The second half of `start_child`: wait for `on_start` of the child behind `ref`. A wait
    that is interrupted (KeyboardInterrupt) kills the child before the interrupt goes on.

    Raises:
        ChildStartError: as `start_child`.
    """
    actor = actor_of(ref)
    if isinstance(actor, ReportsExit):
        try:
            started = actor.wait_initialized(START_TIMEOUT)
        except BaseException:
            kill(ref, "start interrupted")
            raise
        if not started:
            kill(ref, "on_start timed out")
            raise ChildStartError(spec.id, f"on_start did not finish within {START_TIMEOUT}s")
    if not ref.is_alive():
        reason = exit_reason(ref)
        cause = reason.exception if reason is not None else None
        raise ChildStartError(spec.id, f"on_start failed: {reason}") from cause
    return ref


def shutdown_child(child_id: str, ref: pykka.ActorRef[Any], shutdown: Shutdown) -> bool:
    """Stop one child: normally within `shutdown` seconds, else kill and abandon it.

    Returns True when the child stopped in time (or was already dead), False when it had
    to be killed. Never waits longer than `shutdown` unless it is `"infinity"`.
    """
    if shutdown == "brutal_kill":
        kill(ref, "shutdown: brutal_kill")
        return False
    if not ref.is_alive():
        return True
    actor = actor_of(ref)
    if isinstance(actor, AsyncioActor) and actor.on_loop_thread():
        actor.stop_now()  # on its own loop: waiting for a stop message would hold the loop
        return True
    timeout = None if shutdown == "infinity" else float(shutdown)
    try:
        if isinstance(actor, AsyncioActor):  # its LoopFuture, waited for on this thread even
            future: Any = ref.ask(pykka_messages._ActorStop(), block=False)  # if it runs a loop
            if not future.wait(timeout):
                raise pykka.Timeout(f"{timeout} seconds")
        else:
            future = ref.stop(block=False)
    except pykka.ActorDeadError:
        return True
    except pykka.Timeout:
        future = None
    try:
        if future is None:
            raise pykka.Timeout(f"{timeout} seconds")
        future.get(timeout=timeout)
        return True
    except pykka.Timeout:
        log.warning(
            "supervisor.child.shutdown_timeout", child=child_id, shutdown=shutdown, actor=str(ref)
        )
        kill(ref, f"shutdown: did not stop within {shutdown}s")
        return False
    except pykka.ActorDeadError:
        return True


def shutdown_children(children: list[tuple[str, pykka.ActorRef[Any], Shutdown]]) -> None:
    """`shutdown_child` for each of `children`, in the order given, each stopped before the
    next: a run of `AsyncioActor`s of one event loop (called from another thread) is
    stopped in one hop to that loop, not a round trip each (a dynamic supervisor's end
    with 20,000 agents took ~3.5 s of round trips). Should the loop not finish the run
    within the longest of its `shutdown` times, what it has not stopped is stopped one by
    one from here, as `shutdown_child` does (killed once its own time is over)."""
    index = 0
    while index < len(children):
        loop = _loop_of(children[index])
        end = index + 1
        while loop is not None and end < len(children) and _loop_of(children[end]) is loop:
            end += 1
        group = children[index:end]
        if loop is not None and len(group) > 1:
            _stop_on(loop, group)
        for child_id, ref, shutdown in group:  # all of them, or what the loop left alive
            if ref.is_alive():
                shutdown_child(child_id, ref, shutdown)
        index = end


def _loop_of(child: tuple[str, pykka.ActorRef[Any], Shutdown]) -> Any:
    """The event loop a live `AsyncioActor` child is stopped on in one hop (None: stopped
    alone: another kind, killed outright, dead, or on the caller's own loop)."""
    _, ref, shutdown = child
    if shutdown == "brutal_kill" or not ref.is_alive():
        return None
    actor = actor_of(ref)
    if not isinstance(actor, AsyncioActor) or actor.on_loop_thread():
        return None
    return actor.actor_loop


def _stop_on(loop: Any, group: list[tuple[str, pykka.ActorRef[Any], Shutdown]]) -> None:
    """Stop `group` on `loop`, in order, waiting up to the longest of their `shutdown`
    times (not at all when the loop is closed)."""
    done: Future[None] = Future()

    def stop_all() -> None:
        try:
            for child_id, ref, shutdown in group:
                actor = actor_of(ref)
                if isinstance(actor, AsyncioActor) and ref.is_alive():
                    # As a stop message would be: what its inbox held first, then the stop.
                    with contextlib.suppress(Exception):
                        actor.handle_now(pykka_messages._ActorStop())
                if ref.is_alive():  # in its own handler, not started, or its stop failed
                    shutdown_child(child_id, ref, shutdown)  # on its loop: stopped at once
        finally:
            done.set_result(None)

    try:
        loop.call_soon_threadsafe(stop_all)
    except RuntimeError:  # the loop is closed
        return
    times = [shutdown for _, _, shutdown in group]
    timeout = None if "infinity" in times else max(float(t) for t in times)
    with contextlib.suppress(TimeoutError):
        done.result(timeout)
