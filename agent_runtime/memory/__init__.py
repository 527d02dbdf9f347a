"""Session memory (DESIGN.md 9): the history every agent of a session shares, kept in a store.

```python
from agent_runtime.memory import SessionMemory, SessionWriter, MemoryPolicy, window
memory = SessionMemory.default("state/memory.sqlite3")    # durable SqliteStore (WAL, one file)
sequence = memory.append("s1", [UserMessage(content="hi")])
h = memory.history("s1")                                   # SessionHistory(messages, sequence)
memory.compact("s1", [summary], h.sequence)               # ConcurrentModification if it moved on
result = memory.compact_with(model, "s1", keep_last=6)    # a model's summary + the newest 6
memory.auto_compact(model, above_bytes=256 * 1024)        # ... whenever an append passes 256 KiB
with memory.subscribe("s1") as sub:                        # MemoryAdded / MemoryCompacted events
    event = sub.poll(timeout=1.0)
writer = SessionWriter(memory)                             # appends off the event loop, in order
await asyncio.wrap_future(writer.append("s1", turn))       # per session; writer.close() drains
context = window(h.messages, MemoryPolicy.limited_window(20).last_n)
new = memory.changes("s1", since=h.sequence)     # SessionChanges(messages, sequence, replaced)
memory.kv("s1").put("plan", {"step": 2})                   # per-session JSON state (SessionState)
memory = SessionMemory(PostgresStore("postgresql://agent@db/agents"))   # shared by processes
```

A session's `sequence` counts its committed changes (appends, compactions, deletes); it only
grows, which makes `compact(..., expected_sequence)` an optimistic-concurrency check, and
`changes(session, since)` an incremental read (what was appended after `since`, or the whole
history after a compaction). `SessionHistory.bytes` is the history's size in JSON bytes, kept by
the store at every change. Stores: `SqliteStore` (the default: a change whose call returned
survives a crash), `PostgresStore(dsn)` (a server shared by several processes; needs the
`postgres` extra) and `InMemoryStore` (tests); all implement the `MemoryStore` protocol with
the same semantics. A store that cannot open, or fails a change or a read, raises
`MemoryStoreError` naming the store (its file, or its DSN without the password) and the cause;
a failed append is counted by the metric `agent_runtime.memory.append_failures`.
`MemoryAdded` / `MemoryCompacted` carry the history's size in bytes after the change.
"""

from agent_runtime._errors import ConcurrentModification, MemoryStoreError
from agent_runtime.memory._auto_compaction import AutoCompaction
from agent_runtime.memory._compaction import CompactionResult, CompactionSummary
from agent_runtime.memory._configured import open_session_memory
from agent_runtime.memory._in_memory import InMemoryStore
from agent_runtime.memory._memory import SessionMemory
from agent_runtime.memory._models import (
    MemoryAdded,
    MemoryCompacted,
    MemoryEvent,
    MemoryEventAdapter,
    SessionChanges,
    SessionHistory,
)
from agent_runtime.memory._policy import MemoryPolicy, window
from agent_runtime.memory._postgres import PostgresStore
from agent_runtime.memory._size import message_bytes
from agent_runtime.memory._sqlite import SqliteStore
from agent_runtime.memory._state import SessionState
from agent_runtime.memory._store import MemoryStore
from agent_runtime.memory._subscription import MemorySubscription
from agent_runtime.memory._writer import SessionWriter

__all__ = [
    "AutoCompaction",
    "CompactionResult",
    "CompactionSummary",
    "ConcurrentModification",
    "InMemoryStore",
    "MemoryAdded",
    "MemoryCompacted",
    "MemoryEvent",
    "MemoryEventAdapter",
    "MemoryPolicy",
    "MemoryStore",
    "MemoryStoreError",
    "MemorySubscription",
    "PostgresStore",
    "SessionChanges",
    "SessionHistory",
    "SessionMemory",
    "SessionState",
    "SessionWriter",
    "SqliteStore",
    "message_bytes",
    "open_session_memory",
    "window",
]
