"""Fixtures of the workflow tests: a runtime over the working directory's SQLite file (each
test has its own directory), and the PostgreSQL server of the session-memory tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_runtime import Runtime, RuntimeConfig
from tests.agent_runtime.memory.conftest import postgres, postgres_dsn, store
from tests.agent_runtime.workflows.flows import Log

__all__ = ["postgres", "postgres_dsn", "store"]  # fixtures reused from the memory tests


@pytest.fixture(autouse=True)
def _fresh_log() -> Iterator[None]:
    Log.reset()
    yield
    Log.reset()


@pytest.fixture
def runtime() -> Iterator[Runtime]:
    with Runtime.start(RuntimeConfig()) as rt:
        yield rt
