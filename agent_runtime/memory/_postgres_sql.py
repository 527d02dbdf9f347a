"""The tables and statements of a `PostgresStore`."""

from __future__ import annotations

SCHEMA_VERSION = 1
"""The version recorded in `agent_runtime_schema` by this code (newer tables are refused)."""

# Held while the tables are checked or made, so that processes opening one new database at
# the same time do not both create them (CREATE TABLE IF NOT EXISTS races in the catalog).
LOCK_SCHEMA = "SELECT pg_advisory_xact_lock(7365121984326587443)"

# `sessions.count` is the number of messages (positions of an append follow it); `bytes` the
# history's size; `base` the change of the last compaction or delete (0: none). `seq` is the
# change that wrote a message row: along `position` it never decreases, so the index on
# (session, seq, position) finds what came after a change without reading what came before.
TABLES = (
    """CREATE TABLE IF NOT EXISTS agent_runtime_schema (version integer NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS agent_runtime_sessions (
        session  text PRIMARY KEY,
        sequence bigint NOT NULL,
        live     boolean NOT NULL,
        bytes    bigint NOT NULL,
        base     bigint NOT NULL,
        count    bigint NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS agent_runtime_messages (
        session  text NOT NULL,
        position bigint NOT NULL,
        seq      bigint NOT NULL,
        json     text NOT NULL,
        PRIMARY KEY (session, position)
    )""",
    """CREATE INDEX IF NOT EXISTS agent_runtime_messages_by_seq
        ON agent_runtime_messages (session, seq, position)""",
    """CREATE TABLE IF NOT EXISTS agent_runtime_state (
        session text NOT NULL,
        key     text NOT NULL,
        value   text NOT NULL,
        PRIMARY KEY (session, key)
    )""",
)

# (sequence, bytes, json): one row per message, or one with json NULL for a session with
# none; no row for a session never written.
LOAD = """
SELECT s.sequence, s.bytes, m.json
FROM agent_runtime_sessions s
LEFT JOIN agent_runtime_messages m ON m.session = s.session
WHERE s.session = %s
ORDER BY m.position
"""

# (sequence, base, json) of the messages written after change %(since)s.
CHANGES = """
SELECT s.sequence, s.base, m.json
FROM agent_runtime_sessions s
LEFT JOIN agent_runtime_messages m ON m.session = s.session AND m.seq > %(since)s
WHERE s.session = %(session)s
ORDER BY m.seq, m.position
"""

# One statement: bump the session's row (made if missing; its row lock orders concurrent
# appends of the session, across processes) and insert the batch after its last position.
# A data-modifying WITH runs once whether or not the final SELECT reads it.
APPEND = """
WITH bumped AS (
    INSERT INTO agent_runtime_sessions AS cur (session, sequence, live, bytes, base, count)
    VALUES (%(session)s, 1, true, %(bytes)s, 0, %(count)s)
    ON CONFLICT (session) DO UPDATE SET
        sequence = cur.sequence + 1,
        live = true,
        bytes = cur.bytes + EXCLUDED.bytes,
        count = cur.count + EXCLUDED.count
    RETURNING cur.sequence, cur.bytes, cur.count
), inserted AS (
    INSERT INTO agent_runtime_messages (session, position, seq, json)
    SELECT %(session)s, bumped.count - %(count)s + batch.i - 1, bumped.sequence, batch.json
    FROM bumped, unnest(%(json)s::text[]) WITH ORDINALITY AS batch(json, i)
)
SELECT sequence, bytes FROM bumped
"""

# Makes a session's row at sequence 0 if it has none, so that LOCK finds one to lock (the
# row goes with the transaction if no change follows: a failed compaction leaves nothing).
CLAIM = """
INSERT INTO agent_runtime_sessions (session, sequence, live, bytes, base, count)
VALUES (%s, 0, false, 0, 0, 0)
ON CONFLICT (session) DO NOTHING
"""

# (sequence, live) of the session's row, locked until the transaction ends.
LOCK = "SELECT sequence, live FROM agent_runtime_sessions WHERE session = %s FOR UPDATE"

DELETE_MESSAGES = "DELETE FROM agent_runtime_messages WHERE session = %s"

# (session, seq, [json, ...]): a whole history from position 0.
INSERT_MESSAGES = """
INSERT INTO agent_runtime_messages (session, position, seq, json)
SELECT %s, batch.i - 1, %s, batch.json
FROM unnest(%s::text[]) WITH ORDINALITY AS batch(json, i)
"""

# (sequence, live, bytes, base, count, session)
UPDATE_SESSION = """
UPDATE agent_runtime_sessions SET sequence = %s, live = %s, bytes = %s, base = %s, count = %s
WHERE session = %s
"""
