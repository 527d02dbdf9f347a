"""WorkflowStore: workflow records kept in the session memory store's key-value state."""

from __future__ import annotations

from agent_runtime.memory import MemoryStore
from agent_runtime.workflows._records import WorkflowRecord

SESSION = "agent_runtime.workflows"
"""The session whose key-value state holds every workflow record (key: the workflow id)."""


class WorkflowStore:
    """Workflow records in a `MemoryStore` (`SqliteStore`, `PostgresStore`, `InMemoryStore`):
    each record is one JSON value under its id in the state of the session `SESSION`.

    Built on the store's state calls, so it has their guarantees with every backend: a `put`
    is one transaction, committed (synced, with SQLite's default `synchronous="FULL"`)
    before it returns, and seen whole or not at all; `all()` reads every record as of one
    committed change. Blocking I/O: call it off the event loop. Thread-safe.

    Raises (every method):
        MemoryStoreError: the store failed to read or write.
        ValueError: the store is closed.
    """

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def get(self, workflow_id: str) -> WorkflowRecord | None:
        """The record of `workflow_id`, or None."""
        text = self.store.state_get(SESSION, workflow_id)
        return None if text is None else WorkflowRecord.model_validate_json(text)

    def put(self, record: WorkflowRecord) -> None:
        """Commit `record`, replacing the one stored under its id."""
        self.store.state_put(SESSION, record.id, record.model_dump_json())

    def all(self) -> list[WorkflowRecord]:
        """Every stored record, oldest first (by creation, then id)."""
        records = [
            WorkflowRecord.model_validate_json(text)
            for text in self.store.state_items(SESSION).values()
        ]
        return sorted(records, key=lambda r: (r.created_at, r.id))
