"""A watchdog for asyncio's debug mode: logs any actor handler or task step that holds the
loop for more than STEP_BUDGET of CPU time.

It is off unless the loop is in debug mode (`loop.set_debug(True)`, `PYTHONASYNCIODEBUG=1`
or `python -X dev`), so production loops pay one `get_debug()` call per message or task.
CPU time (`time.thread_time`) rather than wall time: a step preempted by another thread
holding the GIL is not the step's fault, while one computing for 5 ms is.
"""

from __future__ import annotations

import collections.abc
import time
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

from supervisors._log import get_logger

log = get_logger(__name__)

T = TypeVar("T")

# The bound of issue 34: no handler or step of a run holds the loop for more than 1 ms of CPU.
STEP_BUDGET = 0.001


def report_if_slow(what: str, started: float) -> None:
    """Log `loop.step.slow` naming `what` when the CPU time since `started` (a
    `time.thread_time()` reading) is over STEP_BUDGET."""
    spent = time.thread_time() - started
    if spent > STEP_BUDGET:
        log.warning(
            "loop.step.slow",
            step=what,
            cpu_ms=round(spent * 1000, 3),
            budget_ms=STEP_BUDGET * 1000,
        )


class StepTimed(collections.abc.Coroutine[Any, Any, T]):
    """`coro` with the CPU time of each of its steps (one `send` or `throw` of the task
    running it) checked against STEP_BUDGET, named `name` (default: `coro`'s qualified
    name)."""

    __slots__ = ("_coro", "_name")

    def __init__(self, coro: Coroutine[Any, Any, T], name: str | None = None) -> None:
        self._coro = coro
        self._name = name if name is not None else step_name(coro)

    def send(self, value: Any, /) -> Any:
        started = time.thread_time()
        try:
            return self._coro.send(value)
        finally:
            report_if_slow(self._name, started)

    def throw(self, *args: Any) -> Any:
        started = time.thread_time()
        try:
            return self._coro.throw(*args)
        finally:
            report_if_slow(self._name, started)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, T]:
        return self._coro.__await__()

    def __repr__(self) -> str:
        return f"<StepTimed {self._coro!r}>"


def step_name(coro: object) -> str:
    """What a task step is known by in the log: its coroutine's qualified name."""
    name = getattr(coro, "__qualname__", None)
    return name if isinstance(name, str) else type(coro).__name__


def watched(
    coro: Coroutine[Any, Any, T], debug: bool, name: str | None = None
) -> Coroutine[Any, Any, T]:
    """`coro` step-timed when `debug` (its loop's `get_debug()`), else `coro` itself."""
    return StepTimed(coro, name) if debug else coro
