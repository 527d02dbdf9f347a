"""The messages an agent's actor takes: calls from its handle (answered) and facts (not)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import Any

import pykka


@dataclass(frozen=True)
class Call:
    """A handle call: the actor runs `_on_<name>(*args)` and answers through `reply`."""

    name: str
    args: tuple[Any, ...]
    reply: Future[Any]


@dataclass(frozen=True)
class Fact:
    """Something the run's driver (or a subscription) tells the actor; no answer."""

    name: str
    args: tuple[Any, ...] = ()


def answer(
    reply: Future[Any], *, result: Any = None, exception: BaseException | None = None
) -> None:
    """Settle a call's reply; one settled already (its actor's exit failed it) stays as it is."""
    if reply.done():  # the common case of a run's end, which its driver settled first: no
        return  # InvalidStateError, whose message formats the future
    with contextlib.suppress(InvalidStateError):
        if exception is not None:
            reply.set_exception(exception)
        else:
            reply.set_result(result)


def teller(ref: pykka.ActorRef[Any]) -> Callable[..., None]:
    """`tell(name, *args)`: send a Fact to the actor behind `ref`; nothing if it is gone (its
    run's end is then settled without it)."""

    def tell(name: str, *args: Any) -> None:
        with contextlib.suppress(pykka.ActorDeadError):
            ref.tell(Fact(name, args))

    return tell
