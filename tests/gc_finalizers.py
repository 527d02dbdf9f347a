"""For tests of code that allocates while it holds a lock: a cyclic collection may start at
that allocation and run finalizers on the same thread, and a finalizer may take the same lock
or change what the code was doing. These make such a collection happen inside a step."""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Callable, Iterator


class FinalizerProbe:
    """Where the finalizers of the garbage ran: `ran_in` gets "inside" for one that ran during
    a step of `collected_inside`, "outside" otherwise. Garbage classes append `now[0]` to
    `ran_in` in their `__del__`."""

    def __init__(self) -> None:
        self.ran_in: list[str] = []
        self.now = ["outside"]

    @contextlib.contextmanager
    def collected_inside(
        self, garbage: list[object], young: int, promotions: int, middle: int = 1
    ) -> Iterator[None]:
        """Drop the cyclic objects in `garbage` (made after a `gc.collect(1)`) so that a
        collection of the young generations takes them at one of the first allocations in
        the block: after `young` allocations, once they have been promoted `promotions`
        times. The collector's thresholds are restored at the block's end."""
        thresholds = gc.get_threshold()
        gc.set_threshold(1, 1, 100_000)
        for _ in range(promotions):
            gc.collect(0)
        garbage.clear()
        gc.set_threshold(young, middle, 100_000)
        self.now[0] = "inside"
        try:
            yield
        finally:
            self.now[0] = "outside"
            gc.set_threshold(*thresholds)


def run_steps_on_a_thread(steps: Callable[[], None], what: str) -> None:
    """Run `steps` on a daemon thread, so a hang there cannot hang the test run; fail if they
    do not end within 30 s, saying that `what` hung. The collector's thresholds are restored
    either way."""
    thresholds = gc.get_threshold()
    finished = threading.Event()

    def run() -> None:
        steps()
        finished.set()

    threading.Thread(target=run, daemon=True).start()
    try:
        assert finished.wait(30), f"{what} hung in a collection's finalizer"
    finally:
        gc.set_threshold(*thresholds)
