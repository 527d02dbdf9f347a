"""What SQLite's errors about a store's file mean: a lock held elsewhere, and the terse
messages in words."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path


def is_busy(exc: BaseException) -> bool:
    """Whether `exc` says another connection holds a lock on the file (SQLITE_BUSY)."""
    return isinstance(exc, sqlite3.OperationalError) and (
        getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_BUSY
    )


# SQLite's terse messages, explained (the original stays in the message, in parentheses).
_CAUSES = {
    "file is not a database": "is not an SQLite database",
    "database disk image is malformed": "is truncated or corrupt",
    "database is locked": "is locked by another connection",
    "attempt to write a readonly database": "is read-only for this process",
    "unable to open database file": "cannot be opened",
    "database or disk is full": "the disk is full",
    "disk I/O error": "the disk failed to read or write",
}


def describe(exc: sqlite3.Error, path: str | Path) -> str:
    """What went wrong, in words, for an SQLite error about the file at `path`."""
    text = str(exc)
    cause = _CAUSES.get(text)
    if text == "unable to open database file" and isinstance(path, Path):
        if path.exists() and not os.access(path, os.R_OK | os.W_OK):
            cause = "cannot be read and written by this process (permission denied)"
        elif not os.access(path.parent, os.W_OK | os.X_OK):
            cause = "its directory cannot be written by this process (permission denied)"
    return f"it {cause} ({text})" if cause else text
