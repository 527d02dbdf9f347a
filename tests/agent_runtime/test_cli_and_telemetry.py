"""The CLI prints the supervision tree; telemetry configures structlog once."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import structlog

from agent_runtime import ConfigError, cli, telemetry
from agent_runtime.config import TelemetryConfig, load_config


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


def test_a_config_typo_prints_the_message_alone_with_the_key_meant(tmp_path: Path) -> None:
    config = tmp_path / "runtime.toml"
    config.write_text("[agent]\ntool_timout = 5\n")
    script = Path(sys.executable).parent / "agent-runtime"  # the console script a user runs
    done = subprocess.run(
        [str(script), "--config", str(config), "tree"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"agent-runtime tree: unknown config key 'agent.tool_timout' (value 5) in {config}: "
        "did you mean 'tool_timeout'?"
    ]


def test_an_unknown_key_far_from_every_key_gets_no_guess(tmp_path: Path) -> None:
    config = tmp_path / "runtime.toml"
    config.write_text("[agent]\nzebra = 5\n")
    with pytest.raises(ConfigError) as error:
        load_config(config)
    assert str(error.value) == f"unknown config key 'agent.zebra' (value 5) in {config}"


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
