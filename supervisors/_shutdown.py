"""Starting one child from its spec and shutting it down within its `shutdown` time."""

from __future__ import annotations

from typing import Any

import pykka
import structlog

from supervisors._actor import SupervisedActor, kill
from supervisors._errors import ChildStartError
from supervisors._spec import ChildSpec, Shutdown

log = structlog.get_logger(__name__)


def start_child(spec: ChildSpec) -> pykka.ActorRef[Any]:
    """Call `spec.start()` and check that it returned a live SupervisedActor's ref.

    Raises:
        ChildStartError: the start function raised, or returned anything else; names the child.
    """
    try:
        ref = spec.start()
    except Exception as exc:
        raise ChildStartError(spec.id, f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(ref, pykka.ActorRef):
        raise ChildStartError(spec.id, f"start returned {ref!r}, not a pykka.ActorRef")
    if not issubclass(ref.actor_class, SupervisedActor):
        ref.stop(block=False)
        raise ChildStartError(
            spec.id, f"{ref.actor_class.__name__} is not a supervisors.SupervisedActor"
        )
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
    try:
        future = ref.stop(block=False)
    except pykka.ActorDeadError:
        return True
    timeout = None if shutdown == "infinity" else float(shutdown)
    try:
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
