"""Suite-wide fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _own_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test runs in its own empty directory, so the default durable session memory
    (`.agent_runtime/memory.sqlite3`, relative to the working directory) is private to it."""
    monkeypatch.chdir(tmp_path)
