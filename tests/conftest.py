"""Suite-wide fixtures."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from agent_runtime import telemetry

LIBRARY_LOGGERS = ("agent_runtime", "supervisors")


@pytest.fixture(autouse=True)
def _own_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test runs in its own empty directory, so the default durable session memory
    (`.agent_runtime/memory.sqlite3`, relative to the working directory) is private to it."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="session", autouse=True)
def _library_logs_captured() -> Iterator[None]:
    """The library's log records go to pytest's log capture (shown with a failing test) and
    never to the terminal: between tests, when pytest has no handler installed, a NullHandler
    keeps Python's last-resort handler from printing what a daemon thread of a test already
    ended logs."""
    handlers = [(logging.getLogger(name), logging.NullHandler()) for name in LIBRARY_LOGGERS]
    for logger, handler in handlers:
        logger.addHandler(handler)
    yield
    for logger, handler in handlers:
        logger.removeHandler(handler)


@pytest.fixture(autouse=True)
def _structlog_unconfigured_after_each_test() -> Iterator[None]:
    """A test that configures structlog (the CLI, `configure_logging=True`) leaves it
    unconfigured again: the next tests' log events go to `logging`, captured, rather than to
    the stream (a stale capture, or the terminal) it was configured with."""
    yield
    structlog.reset_defaults()
    telemetry._configured_by_us = False  # so the next configure_logging() configures again
