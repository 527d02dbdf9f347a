"""A one-shot gate for threads (shut until opened once, then open for every waiter), and the
wait on one made by the first thread that waits."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

V = TypeVar("V")


class Gate:
    """A one-shot `threading.Event` on one C lock, held until `open()`.

    A wait is one C call with no Python code around the lock. An Event's wait has some, and a
    finalizer that a collection runs there (on 3.13, between any two calls) and that sets the
    same Event hangs the waiting thread on the Event's own lock.

    Guarantees: `wait` returns True once `open()` was called (at once for a wait after it),
    False if `timeout` passed first; every waiter is let through. `open()` must be called at
    most once: its owner sees to that under its own lock.
    """

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def open(self) -> None:
        """Let every waiter through, now and later (call once)."""
        self._lock.release()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until opened; False if `timeout` seconds passed first (None: no bound)."""
        if timeout is None:
            passed = self._lock.acquire()
        else:
            passed = self._lock.acquire(timeout=max(timeout, 0.0))
        if passed:
            self._lock.release()  # open for the other waiters too
        return passed


def made_once(owner: object, attribute: str, make: Callable[[], V], lock: Any) -> V:
    """`owner.attribute`, made by `make` if it is None: once, whichever threads ask at once
    (they agree under `lock`). Made before `lock` is taken: a collection that the allocation
    starts may run a finalizer on this thread that takes `lock` or makes it first."""
    made = getattr(owner, attribute)
    if made is not None:
        return made  # type: ignore[no-any-return]
    fresh = make()
    with lock:
        made = getattr(owner, attribute)
        if made is None:
            made = fresh
            setattr(owner, attribute, made)
    return made  # type: ignore[no-any-return]


def wait_on_gate(
    owner: object, attribute: str, settled: Callable[[], bool], lock: Any, timeout: float | None
) -> bool:
    """Block this thread until `settled()`, on a `Gate` kept in `owner.attribute` and made
    by the first thread that waits (None until then: nothing per owner that no thread waits
    on). Whoever settles `owner` does so under `lock` and opens the gate it finds there.

    Returns True once settled, False if `timeout` seconds passed first.
    """
    if settled():
        return True
    gate = made_once(owner, attribute, Gate, lock)
    if settled():  # settled before the gate was there: nobody opens it
        return True
    return gate.wait(timeout)
