"""The tables of a `SqliteStore` file, by schema version, and the steps that bring an older
file up to date."""

from __future__ import annotations

import sqlite3

SCHEMA_VERSION = 2
"""The `PRAGMA user_version` of the files this code writes (newer files are refused).

1: sessions (sequence, live) and messages (position, seq, json).
2: sessions also keep `bytes` (the history's size) and `base` (the last compaction or delete),
   messages are indexed by the change that wrote them (`changes` reads only what is new), and
   `state` holds each session's key-value state."""

# `messages` keeps a rowid (the default): rows hold whole messages, often larger than the
# ~200 bytes WITHOUT ROWID tables are meant for. `seq` records the change that wrote a row;
# along `position` it never decreases, so `messages_by_seq` finds what came after a change.
_TABLES = """
CREATE TABLE IF NOT EXISTS sessions (
    session  TEXT PRIMARY KEY,
    sequence INTEGER NOT NULL,
    live     INTEGER NOT NULL,
    bytes    INTEGER NOT NULL DEFAULT 0,
    base     INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS messages (
    session  TEXT NOT NULL,
    position INTEGER NOT NULL,
    seq      INTEGER NOT NULL,
    json     TEXT NOT NULL,
    PRIMARY KEY (session, position)
);
"""

_SINCE_1 = """
CREATE INDEX IF NOT EXISTS messages_by_seq ON messages (session, seq, position);
CREATE TABLE IF NOT EXISTS state (
    session TEXT NOT NULL,
    key     TEXT NOT NULL,
    value   TEXT NOT NULL,
    PRIMARY KEY (session, key)
) WITHOUT ROWID;
"""

# A file of version 1 lacks the two columns: add them, with each session's size summed once
# (the database is UTF-8, so a row's text cast to a blob is its JSON's bytes). Its last
# compaction is unknown: `base = sequence` makes `changes` answer a reader of an older
# sequence with the whole history, which is always correct.
_FROM_1 = """
ALTER TABLE sessions ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN base INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET base = sequence, bytes = (
    SELECT COALESCE(SUM(length(CAST(json AS BLOB))), 0) FROM messages
    WHERE messages.session = sessions.session
);
"""


def upgrade(conn: sqlite3.Connection, version: int) -> None:
    """Create the tables of a new file (`version` 0) or bring a file of `version` up to
    `SCHEMA_VERSION`, inside the caller's write transaction."""
    script = (_TABLES if version == 0 else _FROM_1 if version == 1 else "") + _SINCE_1
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
