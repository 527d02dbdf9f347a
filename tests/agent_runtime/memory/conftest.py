"""Fixtures shared by the session-memory tests: every store kind (a PostgreSQL server the test
session starts itself for `PostgresStore`), and tagged message batches."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime.memory import (
    InMemoryStore,
    MemoryStore,
    PostgresStore,
    SessionHistory,
    SqliteStore,
)
from agent_runtime.messages import Message, UserMessage
from tests.agent_runtime.memory import postgres_server

STORE_KINDS = ["in_memory", "sqlite", "postgres"]

_schemas = itertools.count()


@pytest.fixture(scope="session")
def postgres() -> Iterator[postgres_server.Server]:
    """One PostgreSQL server for the whole test session, stopped by its PID at the end (also
    when a test or the start failed). Skips, naming the fix, where it cannot run."""
    reason = postgres_server.unavailable()
    if reason is not None:
        pytest.skip(reason)
    with postgres_server.running() as server:
        yield server


@pytest.fixture
def postgres_dsn(postgres: postgres_server.Server) -> Iterator[str]:
    """A DSN whose tables live in a schema of their own (so each test starts empty), dropped
    after the test."""
    import psycopg

    schema = f"t{next(_schemas)}"
    with psycopg.connect(postgres.dsn(), autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    yield postgres.dsn(options=f"-csearch_path%3D{schema}")
    with psycopg.connect(postgres.dsn(), autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA {schema} CASCADE")


def open_store(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> MemoryStore:
    """A fresh store of `kind` (an SQLite file under `tmp_path`, a Postgres schema of its own)."""
    if kind == "in_memory":
        return InMemoryStore()
    if kind == "postgres":
        return PostgresStore(request.getfixturevalue("postgres_dsn"))
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
