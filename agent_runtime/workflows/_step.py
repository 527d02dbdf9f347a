"""`@step`: marks an `async def` method of a Workflow as one of its steps, with its timeout
and recovery."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from agent_runtime.workflows._errors import InvalidWorkflow
from agent_runtime.workflows._recovery import Recovery

StepFunction = Callable[[Any, Any], Coroutine[Any, Any, None]]
"""A step's function: `async def name(self, ctx: StepContext) -> None` (typed loosely here:
the context's module depends on this one)."""
F = TypeVar("F", bound=Callable[..., Any])

STEP_ATTRIBUTE = "__workflow_step__"


@dataclass(frozen=True)
class StepSpec:
    """A step as declared: its name (the method's), function, timeout and recovery."""

    name: str
    function: StepFunction
    timeout: float | None
    recovery: Recovery | None


@overload
def step(fn: F, /) -> F: ...
@overload
def step(*, timeout: float | None = None, recovery: Recovery | None = None) -> Callable[[F], F]: ...
def step(
    fn: F | None = None, /, *, timeout: float | None = None, recovery: Recovery | None = None
) -> F | Callable[[F], F]:
    """Declare an `async def name(self, ctx: StepContext) -> None` method of a `Workflow`
    as the step `name`; bare `@step` or `@step(timeout=..., recovery=...)`.

    `timeout` (seconds, None: none) bounds each attempt, not counting time spent paused in
    `ctx.pause`: past it the step's task is canceled, the runs of the agents it used are
    aborted, and the attempt fails with `StepTimeout`. `recovery` (`max_retries(n)`,
    `.failover_to(step)`) says what follows a failed attempt; without it the workflow's
    `default_recovery` applies.

    Guarantees: a step may run more than once (a retry, or a re-run after a crash or restart
    that interrupted it): it must be idempotent, or look at `ctx.attempt` (1 on its first
    run in this visit) to skip what an earlier attempt did.

    Raises:
        InvalidWorkflow: the function is not an `async def`, or the timeout or recovery is
            invalid (each named).
    """
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise InvalidWorkflow(f"invalid step timeout {timeout!r} (expected seconds > 0, or None)")
    if recovery is not None and not isinstance(recovery, Recovery):
        raise InvalidWorkflow(
            f"invalid step recovery {recovery!r} (expected max_retries(n), optionally "
            ".failover_to(step), or None)"
        )

    def mark(function: F) -> F:
        if not inspect.iscoroutinefunction(function):
            raise InvalidWorkflow(
                f"step {getattr(function, '__qualname__', function)!r} must be an async def "
                "method taking (self, ctx)"
            )
        spec = StepSpec(
            function.__name__,
            function,
            None if timeout is None else float(timeout),
            recovery,
        )
        setattr(function, STEP_ATTRIBUTE, spec)
        return function

    return mark(fn) if fn is not None else mark


def step_of(value: object) -> StepSpec | None:
    """The StepSpec `@step` attached to `value`, or None."""
    spec = getattr(value, STEP_ATTRIBUTE, None)
    return spec if isinstance(spec, StepSpec) else None
