"""The CLI prints the supervision tree; telemetry configures structlog once."""

from __future__ import annotations

import io
import json

import pytest
import structlog

from agent_runtime import cli, telemetry
from agent_runtime.config import TelemetryConfig


def test_tree_command_prints_every_root_child(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["tree"]) == 0
    out = capsys.readouterr().out
    for child in ("abort_table", "registry", "subagents", "loop_tasks", "tool_tasks"):
        assert child in out


def test_help_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "tree" in out and "demo" in out


def test_json_logging_when_not_a_terminal_and_levels_filtered() -> None:
    stream = io.StringIO()
    try:
        assert telemetry.configure_logging(
            TelemetryConfig(log_level="info"), stream=stream, force=True
        )
        log = structlog.get_logger("test")
        log.info("thing.happened", size=3)
        log.debug("thing.hidden")
        lines = [json.loads(line) for line in stream.getvalue().splitlines()]
        assert [line["event"] for line in lines] == ["thing.happened"]
        assert lines[0]["size"] == 3 and lines[0]["level"] == "info"
        assert telemetry.configure_logging(TelemetryConfig()) is False  # once
    finally:
        structlog.reset_defaults()
