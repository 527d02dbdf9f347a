"""Fixtures of the workflow tests: the PostgreSQL server of the session-memory tests (their
runtime is the suite's `runtime` fixture, over the SQLite file of the test's own directory)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.agent_runtime.memory.conftest import postgres, postgres_dsn, store
from tests.agent_runtime.workflows.flows import Log

__all__ = ["postgres", "postgres_dsn", "store"]  # fixtures reused from the memory tests


@pytest.fixture(autouse=True)
def _fresh_log() -> Iterator[None]:
    Log.reset()
    yield
    Log.reset()
