"""A library is quiet until asked: `Runtime.start()` leaves logging to the application, the
runtime's events then go to `logging` (warnings shown, by Python's default), and asking
(`configure_logging=True`, `[telemetry] configure_logging`, the CLI) gives the runtime's lines."""

from __future__ import annotations

import inspect
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from agent_runtime import Runtime
from agent_runtime.config import MemoryConfig, RuntimeConfig, TelemetryConfig
from agent_runtime.testing import ScriptedModel
from supervisors._log import get_logger

QUICK_START = """
from agent_runtime import Runtime
from agent_runtime.testing import ScriptedModel

with Runtime.start() as runtime:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["hello"]))
    print(agent.run("hi", timeout=10).text)
"""


@pytest.fixture(autouse=True)
def _unconfigured() -> Iterator[None]:
    structlog.reset_defaults()
    yield


def test_the_quick_start_prints_its_answer_and_no_log_line() -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(QUICK_START)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello\n"
    assert done.stderr == ""


def test_runtime_start_leaves_structlog_unconfigured_by_default() -> None:
    with Runtime.start(RuntimeConfig(memory=MemoryConfig(store="memory"))) as runtime:
        agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["hello"]))
        assert agent.run("hi", timeout=10).text == "hello"
        assert not structlog.is_configured()


def test_the_defaults_are_off_and_warning() -> None:
    for start in (Runtime.start, Runtime.astart):
        assert inspect.signature(start).parameters["configure_logging"].default is False
    assert TelemetryConfig().configure_logging is False
    assert TelemetryConfig().log_level == "warning"  # once asked: the runtime's warnings


def test_unconfigured_the_runtimes_events_go_to_stdlib_logging(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="agent_runtime"):
        get_logger("agent_runtime.example").bind(session="s").warning("thing.odd", size=3)
    [record] = [r for r in caplog.records if r.name == "agent_runtime.example"]
    assert record.levelno == logging.WARNING
    assert record.getMessage() == "thing.odd session='s' size=3"


@pytest.mark.parametrize("ask", ["argument", "config"])
def test_asking_configures_structlog_from_telemetry(ask: str) -> None:
    telemetry = TelemetryConfig(configure_logging=ask == "config")
    config = RuntimeConfig(memory=MemoryConfig(store="memory"), telemetry=telemetry)
    with Runtime.start(config, configure_logging=ask == "argument"):
        assert structlog.is_configured()


def _capture_at(level: int, wrapper_class: Any = None) -> list[dict[str, Any]]:
    """Configure structlog to keep each logged event dict (from `level` up), in a list."""
    lines: list[dict[str, Any]] = []

    def keep(_logger: Any, _method: str, event: dict[str, Any]) -> str:
        lines.append(event)
        return ""

    structlog.configure(
        processors=[keep],
        wrapper_class=wrapper_class or structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.ReturnLoggerFactory(),
        cache_logger_on_first_use=False,
    )
    return lines


def test_a_reconfigured_level_applies_to_the_next_line_of_every_logger() -> None:
    log = get_logger("agent_runtime.test").bind(agent="a")
    lines = _capture_at(logging.INFO)
    log.debug("hidden")
    log.info("shown")
    assert not log.is_enabled_for(logging.DEBUG) and log.is_enabled_for(logging.INFO)
    lines = _capture_at(logging.DEBUG)  # the level is read per call, not kept from before
    log.debug("now shown")
    assert log.is_enabled_for(logging.DEBUG)
    assert [(e["event"], e["agent"]) for e in lines] == [("now shown", "a")]
    lines = _capture_at(logging.ERROR)
    log.warning("hidden")
    log.exception("an error with its traceback")
    assert [e["event"] for e in lines] == ["an error with its traceback"]


def test_another_wrapper_class_decides_for_itself() -> None:
    """A wrapper that is not a filtering bound logger is asked per line (here: every line)."""
    lines = _capture_at(logging.NOTSET, wrapper_class=structlog.BoundLogger)
    log = get_logger("agent_runtime.test")
    log.debug("kept")
    assert log.is_enabled_for(logging.DEBUG)
    assert [e["event"] for e in lines] == ["kept"]
