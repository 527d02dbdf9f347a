"""Handles for supervisors found in a tree (for tools that print or inspect it)."""

from __future__ import annotations

from typing import Any

import pykka

from supervisors._dynamic import DynamicSupervisor, DynamicSupervisorActor
from supervisors._supervisor import StaticSupervision, Supervisor


def supervisor_of(ref: pykka.ActorRef[Any]) -> Supervisor | DynamicSupervisor | None:
    """The handle of the supervisor behind `ref`, or None if `ref` is not a supervisor."""
    if issubclass(ref.actor_class, DynamicSupervisorActor):
        return DynamicSupervisor(ref)
    if issubclass(ref.actor_class, StaticSupervision):
        return Supervisor(ref)
    return None
