"""Suite-wide fixtures."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from agent_runtime import Runtime, telemetry
from agent_runtime.config import RuntimeConfig

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


@pytest.fixture
def make_runtime(_own_working_directory: None) -> Iterator[Callable[..., Runtime]]:
    """A factory of started runtimes, each stopped at teardown (also when the test failed).

    `make_runtime(**sections)` starts `Runtime.start(RuntimeConfig(**sections))`: a section as
    its config object or as a dict, e.g. `make_runtime(memory=MemoryConfig(store="memory"))`
    or `make_runtime(agent={"abort_grace": 60})`; `make_runtime(config)` starts a
    RuntimeConfig made elsewhere (not both). With no arguments: the default `RuntimeConfig()`,
    whose durable session memory lands in the test's own directory.

    At teardown every runtime the factory made is stopped, the last made first; a stop that
    fails (a runtime that would not stop in time) fails the test's teardown after the others
    were stopped. A runtime the test stopped itself is fine: `stop()` is idempotent.
    """
    with contextlib.ExitStack() as stops:

        def make(config: RuntimeConfig | None = None, /, **sections: Any) -> Runtime:
            if config is not None and sections:
                raise TypeError("make_runtime() takes a RuntimeConfig or sections, not both")
            if config is None:
                config = RuntimeConfig.model_validate(sections)
            runtime = Runtime.start(config)
            stops.callback(runtime.stop)
            return runtime

        yield make


@pytest.fixture
def runtime(make_runtime: Callable[..., Runtime]) -> Runtime:
    """A started runtime of the default `RuntimeConfig()`, stopped at teardown (also when the
    test failed). A test that needs another configuration uses `make_runtime(...)`."""
    return make_runtime()
