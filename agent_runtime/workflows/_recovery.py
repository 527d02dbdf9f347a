"""Recovery strategies of steps: how many times a failed step runs again, and where it goes
after that (`max_retries(2).failover_to("error")`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Recovery(BaseModel):
    """What happens when an attempt of a step fails (it raised, or ran past its timeout).

    The step runs again, from the state committed before it, until it has failed
    `max_retries + 1` times in a row; then the workflow goes on at `failover` (with that
    same state) or, without one, ends `failed` with the last error. A restart of the process
    in the middle of a step is not a failure and uses up no retry. Build it with
    `max_retries(n)` and `.failover_to(step)`; frozen.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_retries: int = Field(default=0, ge=0)
    failover: str | None = Field(default=None, min_length=1)

    def failover_to(self, step: str) -> Recovery:
        """This recovery, going on at `step` once the retries are used up. The step must be
        one of the workflow's (checked when the workflow starts).

        Raises:
            TypeError: `step` is not a non-empty str.
        """
        if not isinstance(step, str) or not step:
            raise TypeError(f"failover_to needs a step name (a non-empty str), not {step!r}")
        return self.model_copy(update={"failover": step})

    def decide(self, failures: int) -> Literal["retry", "failover", "fail"]:
        """What to do after the step failed `failures` times in a row (a pure rule)."""
        if failures <= self.max_retries:
            return "retry"
        return "failover" if self.failover is not None else "fail"


def max_retries(n: int) -> Recovery:
    """A recovery that runs a failed step again up to `n` times (`n` >= 0), then fails the
    workflow, or goes on at `.failover_to(step)`.

    Raises:
        TypeError: `n` is not an int; ValueError: it is negative.
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"max_retries needs an int >= 0, not {n!r}")
    if n < 0:
        raise ValueError(f"invalid max_retries {n} (expected an int >= 0)")
    return Recovery(max_retries=n)


NO_RECOVERY = Recovery()
"""The default of `Workflow.default_recovery`: a failed step fails the workflow."""
