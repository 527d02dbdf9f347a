"""ChildSpec, ChildInfo and ChildCounts: what a supervisor is told and what it reports."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import pykka
from pydantic import BaseModel, ConfigDict, field_validator

Restart = Literal["permanent", "transient", "temporary"]
ChildType = Literal["worker", "supervisor"]
Shutdown = float | Literal["brutal_kill", "infinity"]

RESTART_TYPES: tuple[str, ...] = ("permanent", "transient", "temporary")
CHILD_TYPES: tuple[str, ...] = ("worker", "supervisor")


def _one_of(field: str, value: object, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"unknown {field} {value!r} (expected one of: {', '.join(allowed)})")
    return value


class ChildSpec(BaseModel):
    """How to start one child and what to do when it exits (Erlang's child specification).

    `start` returns the `pykka.ActorRef` of a started `SupervisedActor`. `restart`:
    `permanent` always restarts, `transient` only after an abnormal exit, `temporary` never.
    `shutdown`: seconds to wait for a normal stop before the child is abandoned and
    reported, `"brutal_kill"` to kill without waiting, `"infinity"` to wait for ever.

    Raises:
        ValueError (pydantic.ValidationError): a bad field; the message names it and its value.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, extra="forbid")

    id: str
    start: Callable[[], pykka.ActorRef[Any]]
    restart: Restart = "permanent"
    shutdown: Shutdown = 5.0
    type: ChildType = "worker"

    def __init__(
        self,
        id: str,
        start: Callable[[], pykka.ActorRef[Any]],
        restart: Restart = "permanent",
        shutdown: Shutdown = 5.0,
        type: ChildType = "worker",
    ) -> None:
        """The DESIGN.md signature, positional or by keyword (validated as the fields)."""
        super().__init__(id=id, start=start, restart=restart, shutdown=shutdown, type=type)

    @field_validator("restart", mode="before")
    @classmethod
    def _check_restart(cls, value: object) -> object:
        return _one_of("restart type", value, RESTART_TYPES)

    @field_validator("type", mode="before")
    @classmethod
    def _check_type(cls, value: object) -> object:
        return _one_of("child type", value, CHILD_TYPES)

    @field_validator("shutdown", mode="before")
    @classmethod
    def _check_shutdown(cls, value: object) -> object:
        if isinstance(value, str):
            return _one_of("shutdown", value, ("brutal_kill", "infinity"))
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(
                f"invalid shutdown {value!r} (expected seconds >= 0, 'brutal_kill' or 'infinity')"
            )
        return value

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not value:
            raise ValueError("invalid child id '' (expected a non-empty string)")
        return value


class ChildInfo(BaseModel):
    """One row of `which_children()`: the child's id, its current ref (None when not running)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    id: str
    ref: pykka.ActorRef[Any] | None
    restart: Restart
    type: ChildType
    alive: bool


class ChildCounts(BaseModel):
    """`count_children()`: specs known, children running, and how many of each type."""

    model_config = ConfigDict(frozen=True)

    specs: int
    active: int
    supervisors: int
    workers: int
