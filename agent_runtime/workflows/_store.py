"""WorkflowStore: workflow records kept in the session memory store's key-value state, each
read back as a record or, when it cannot be, as `Corrupt` (logged)."""

from __future__ import annotations

import json

from pydantic import ValidationError

from agent_runtime.memory import MemoryStore
from agent_runtime.workflows._records import Corrupt, WorkflowRecord
from supervisors._log import get_logger

SESSION = "agent_runtime.workflows"
"""The session whose key-value state holds every workflow record (key: the workflow id)."""

log = get_logger(__name__)

Stored = tuple[str, WorkflowRecord | Corrupt]
"""A stored record: its JSON text (what a compare-and-set expects) and what it reads as."""


class WorkflowStore:
    """Workflow records in a `MemoryStore` (`SqliteStore`, `PostgresStore`, `InMemoryStore`):
    each record is one JSON value under its id in the state of the session `SESSION`.

    Built on the store's state calls, so it has their guarantees with every backend: a write
    is one transaction, committed (synced, with SQLite's default `synchronous="FULL"`)
    before it returns, and seen whole or not at all; `all()` reads every record as of one
    committed change. A record that is not a valid `WorkflowRecord` is read as `Corrupt`
    (and logged as `workflow.record.corrupt` with its id), never raised. Blocking I/O: call
    it off the event loop. Thread-safe.

    Raises (every method):
        MemoryStoreError: the store failed to read or write.
        ValueError: the store is closed.
    """

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def read(self, workflow_id: str) -> Stored | None:
        """The record of `workflow_id` with its text, or None."""
        text = self.store.state_get(SESSION, workflow_id)
        return None if text is None else (text, parse(workflow_id, text))

    def get(self, workflow_id: str) -> WorkflowRecord | Corrupt | None:
        """The record of `workflow_id`, or None."""
        stored = self.read(workflow_id)
        return None if stored is None else stored[1]

    def put(self, record: WorkflowRecord) -> None:
        """Commit `record`, replacing the one stored under its id (unconditionally)."""
        self.store.state_put(SESSION, record.id, record.model_dump_json())

    def compare_and_set(self, workflow_id: str, expected: str | None, text: str) -> bool:
        """Store `text` under `workflow_id` if `expected` is what is stored (None: nothing)."""
        return self.store.state_compare_and_set(SESSION, workflow_id, expected, text)

    def all(self) -> list[Stored]:
        """Every stored record with its text, oldest first (by creation, then id); corrupt
        ones by id, after the others."""
        stored = [(text, parse(key, text)) for key, text in self.store.state_items(SESSION).items()]

        def order(item: Stored) -> tuple[int, float, str]:
            found = item[1]
            if isinstance(found, Corrupt):
                return (1, 0.0, found.id)
            return (0, found.created_at, found.id)

        return sorted(stored, key=order)


def parse(workflow_id: str, text: str) -> WorkflowRecord | Corrupt:
    """`text` as a record of `workflow_id`, or `Corrupt` saying why not (logged)."""
    problem: str
    raw: object = None
    try:
        raw = json.loads(text)
        record = WorkflowRecord.model_validate(raw)
    except ValueError as exc:  # ValidationError is one
        if isinstance(exc, ValidationError):
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "the record"
            problem = f"{exc.error_count()} invalid field(s), first {where}: {first['msg']}"
        else:
            problem = f"not JSON: {exc}"
    else:
        if record.id == workflow_id:
            return record
        problem = f"it holds the id {record.id!r}"
    log.warning("workflow.record.corrupt", workflow_id=workflow_id, problem=problem)
    return Corrupt(workflow_id, problem, raw)
