"""Fixtures shared by the session-memory tests: every store kind, and tagged message batches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime.memory import (
    InMemoryStore,
    MemoryStore,
    SessionHistory,
    SqliteStore,
)
from agent_runtime.messages import Message, UserMessage

STORE_KINDS = ["in_memory", "sqlite"]


def open_store(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> MemoryStore:
    """A fresh store of `kind` (an SQLite file under `tmp_path`)."""
    if kind == "in_memory":
        return InMemoryStore()
    return SqliteStore(tmp_path / "memory.sqlite3")


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryStore]:
    """Each store kind in turn: the contract tests must pass on all of them."""
    opened = open_store(request, request.param, tmp_path)
    yield opened
    opened.close()


def batch(tag: str, size: int = 3) -> list[Message]:
    """`size` user messages whose texts are `"<tag>/<i>"`, with a fixed timestamp."""
    return [UserMessage(content=f"{tag}/{i}", timestamp=0.0) for i in range(size)]


def texts(messages: list[Message]) -> list[str]:
    """The texts of user messages (what `batch` tagged)."""
    return [m.text for m in messages if isinstance(m, UserMessage)]


def expected(messages: list[Message], sequence: int) -> SessionHistory:
    """The history a store must load: `messages` at `sequence`, with their size in `bytes`
    (counted here from scratch, as the stores must not)."""
    size = sum(len(m.model_dump_json().encode()) for m in messages)
    return SessionHistory(messages=messages, sequence=sequence, bytes=size)
