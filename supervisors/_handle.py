"""ActorHandle: the caller-side face of one supervised actor (its ref, whether it is alive)."""

from __future__ import annotations

from typing import Any, Self

import pykka


class ActorHandle:
    """What every supervisors handle has: the actor's `ref` and `alive`, and `of(ref)` to
    get the handle of a (possibly restarted) actor found in a tree."""

    def __init__(self, ref: pykka.ActorRef[Any]) -> None:
        self._ref = ref

    @classmethod
    def of(cls, ref: pykka.ActorRef[Any]) -> Self:
        """The handle of the actor behind `ref` (e.g. the current child after a restart).

        Raises:
            TypeError: `ref` is not an actor of this handle's kind.
        """
        return cls(ref)

    @property
    def ref(self) -> pykka.ActorRef[Any]:
        """The actor's pykka ActorRef (to nest it in a ChildSpec, monitor or kill it)."""
        return self._ref

    @property
    def alive(self) -> bool:
        """True while the actor runs."""
        return self._ref.is_alive()
