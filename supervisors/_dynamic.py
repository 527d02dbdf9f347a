"""DynamicSupervisor: children started on demand, each restarted alone (one_for_one)."""

from __future__ import annotations

import time
from typing import Any

import pykka

from supervisors._core import Child, SupervisorCore, SupervisorHandle
from supervisors._errors import MaxChildrenReached
from supervisors._intensity import Clock, check_intensity
from supervisors._spec import ChildSpec


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
        self.max_children = max_children

    def add(self, spec: ChildSpec) -> pykka.ActorRef[Any]:
        if self.max_children is not None and len(self.children) >= self.max_children:
            raise MaxChildrenReached(self.max_children)
        child = Child(spec)
        ref = self.launch(child)
        self.children.append(child)
        return ref

    def remove(self, ref: pykka.ActorRef[Any]) -> bool:
        child = next((c for c in self.children if c.ref is ref), None)
        if child is None:
            return False
        self.terminate(child)
        self.children.remove(child)
        return True


class DynamicSupervisor(SupervisorHandle):
    """A supervisor whose children are started and stopped at run time (OTP's
    DynamicSupervisor).

    Each child is restarted alone according to its own restart type; a child that is not
    restarted is forgotten. Child ids need not be unique (a child is identified by its ref).
    More than `max_restarts` restarts within `max_seconds` stops every child and exits the
    supervisor abnormally.
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
            ValueError: `spec` is not a ChildSpec.
        """
        if not isinstance(spec, ChildSpec):
            raise ValueError(f"invalid child {spec!r} (expected a ChildSpec)")
        actor = self._actor()
        return self._call(lambda: actor.add(spec), timeout=None)

    def terminate_child(self, ref: pykka.ActorRef[Any]) -> bool:
        """Stop the child behind `ref` within its shutdown and forget it.

        Returns False when `ref` is not (or no longer) a child of this supervisor.
        """
        actor = self._actor()
        return self._call(lambda: actor.remove(ref), timeout=None)
