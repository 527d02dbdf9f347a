"""Supervisor: a static list of children under one_for_one, one_for_all or rest_for_one."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

import pykka

from supervisors._actor import SupervisedActor
from supervisors._asyncio_actor import AsyncioActor
from supervisors._core import CALL_TIMEOUT, Child, SupervisorCore, SupervisorHandle
from supervisors._errors import ChildStartError
from supervisors._intensity import Clock, check_intensity
from supervisors._spec import ChildSpec

Strategy = Literal["one_for_one", "one_for_all", "rest_for_one"]
STRATEGIES: tuple[str, ...] = ("one_for_one", "one_for_all", "rest_for_one")


class StaticSupervision(SupervisorCore):
    """A supervisor of a fixed list of children (either actor kind: see the two below)."""

    def __init__(
        self, name: str, strategy: Strategy, max_restarts: int, max_seconds: float, clock: Clock
    ) -> None:
        super().__init__(name, max_restarts, max_seconds, clock)
        self.strategy = strategy

    def restart_group(self, child: Child) -> list[Child]:
        if self.strategy == "one_for_all":
            return list(self.children)
        if self.strategy == "rest_for_one":
            return self.children[self.children.index(child) :]
        return [child]

    def start_initial(self, specs: list[ChildSpec]) -> None:
        """Start `specs` in order; on a failure stop the started ones in reverse and raise."""
        for spec in specs:
            child = Child(spec)
            try:
                self.launch(child)
            except ChildStartError:
                self.terminate_all()
                self.children.clear()
                raise
            self.children.append(child)

    def find(self, child_id: str) -> Child:
        for child in self.children:
            if child.spec.id == child_id:
                return child
        raise KeyError(f"no child with id {child_id!r} in supervisor {self.name!r}")


class SupervisorActor(StaticSupervision, SupervisedActor):
    """A static supervisor on a thread of its own."""


class LoopSupervisorActor(StaticSupervision, AsyncioActor):
    """A static supervisor handled on an event loop (no thread): for children that live on
    that loop too, which it then starts and stops without ever waiting for the loop."""

    use_actor_registry = False


class Supervisor(SupervisorHandle):
    """A supervisor of a fixed, ordered list of children, with Erlang/OTP semantics.

    Children start in list order and stop in reverse order, each within its `shutdown`.
    When a child exits, its restart type decides whether it is restarted and the strategy
    decides which children restart with it: `one_for_one` (itself), `one_for_all` (every
    child, the others stopped first in reverse order), `rest_for_one` (itself and the
    children started after it). More than `max_restarts` restarts within `max_seconds`
    makes the supervisor stop every child in reverse order and exit abnormally, which its
    own supervisor sees as a crash.
    """

    @classmethod
    def start(
        cls,
        children: list[ChildSpec],
        strategy: Strategy = "one_for_one",
        max_restarts: int = 3,
        max_seconds: float = 5.0,
        name: str | None = None,
        *,
        clock: Clock = time.monotonic,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Supervisor:
        """Start the supervisor and its children, in order, before returning.

        `clock` (seconds, monotonic) times restart intensity; tests inject a fake one.
        With `loop`, the supervisor is an `AsyncioActor` on that loop instead of a thread
        of its own (for `AsyncioActor` children on the same loop: it then starts, restarts
        and stops them without waiting for the loop, also when called on it).

        Raises:
            ValueError: unknown strategy, `max_restarts < 0`, `max_seconds <= 0`, a child that
                is not a ChildSpec, or duplicate child ids; the message names field and value.
            ChildStartError: a child's start function failed; the children started before it
                were stopped again and the supervisor is not running.
        """
        if strategy not in STRATEGIES:
            raise ValueError(
                f"unknown strategy {strategy!r} (expected one of: {', '.join(STRATEGIES)})"
            )
        check_intensity(max_restarts, max_seconds)
        specs = list(children)
        _check_specs(specs)
        label = name or f"supervisor-{id(specs):x}"
        ref: pykka.ActorRef[Any]
        if loop is None:
            ref = SupervisorActor.start(label, strategy, max_restarts, max_seconds, clock)
        else:
            ref = LoopSupervisorActor.start(
                label, strategy, max_restarts, max_seconds, clock, loop=loop
            )
        handle = cls(ref)
        actor = handle._actor()
        try:
            handle._call(lambda: actor.start_initial(specs), timeout=None)
        except BaseException:
            handle.stop(timeout=CALL_TIMEOUT)
            raise
        return handle

    def _actor(self) -> StaticSupervision:
        actor = self._actor_obj
        assert isinstance(actor, StaticSupervision)
        return actor

    def start_child(self, spec: ChildSpec) -> pykka.ActorRef[Any]:
        """Add a child at the end of the list and start it.

        Raises:
            ValueError: a child with this id already exists.
            ChildStartError: its start function failed (the spec is not kept).
        """
        _check_specs([spec])
        actor = self._actor()

        def add() -> pykka.ActorRef[Any]:
            if any(c.spec.id == spec.id for c in actor.children):
                raise ValueError(f"duplicate child id {spec.id!r} in supervisor {actor.name!r}")
            child = Child(spec)
            ref = actor.launch(child)
            actor.children.append(child)
            return ref

        return self._call(add, timeout=None)

    def terminate_child(self, child_id: str) -> None:
        """Stop a child (it is not restarted); a temporary child's spec is deleted too.

        Raises:
            KeyError: no child has this id.
        """
        actor = self._actor()

        def terminate() -> None:
            child = actor.find(child_id)
            actor.terminate(child)
            if child.spec.restart == "temporary":
                actor.children.remove(child)

        self._call(terminate, timeout=None)

    def restart_child(self, child_id: str) -> pykka.ActorRef[Any]:
        """Start again a child that was terminated.

        Raises:
            KeyError: no child has this id.
            RuntimeError: the child is running.
            ChildStartError: its start function failed.
        """
        actor = self._actor()

        def restart() -> pykka.ActorRef[Any]:
            child = actor.find(child_id)
            if child.ref is not None:
                raise RuntimeError(f"child {child_id!r} is running; terminate it first")
            return actor.launch(child)

        return self._call(restart, timeout=None)

    def delete_child(self, child_id: str) -> None:
        """Forget a terminated child's spec.

        Raises:
            KeyError: no child has this id.
            RuntimeError: the child is running.
        """
        actor = self._actor()

        def delete() -> None:
            child = actor.find(child_id)
            if child.ref is not None:
                raise RuntimeError(f"child {child_id!r} is running; terminate it first")
            actor.children.remove(child)

        self._call(delete)


def _check_specs(specs: list[ChildSpec]) -> None:
    seen: set[str] = set()
    for spec in specs:
        if not isinstance(spec, ChildSpec):
            raise ValueError(f"invalid child {spec!r} (expected a ChildSpec)")
        if spec.id in seen:
            raise ValueError(f"duplicate child id {spec.id!r}")
        seen.add(spec.id)
