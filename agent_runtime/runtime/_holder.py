"""A supervised actor that stands for a shared table in the supervision tree."""

from __future__ import annotations

from typing import Any

from supervisors import SupervisedActor


class TableOwner(SupervisedActor):
    """Owns (references) a thread-safe table so the tree shows and supervises it.

    The table itself is created by the Runtime and handed to every incarnation of this
    actor, so a crash and restart of the owner loses no entry (Lemon keeps its ETS tables
    alive the same way, with an heir).
    """

    def __init__(self, table: Any) -> None:
        super().__init__()
        self.table = table
