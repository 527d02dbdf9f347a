"""docs/configuration.md is generated from RuntimeConfig (agent_runtime.cli.config_reference):
it is current, it names every key, and every environment variable it names is one
load_config reads."""

from __future__ import annotations

import json

import pytest

from agent_runtime import load_config
from agent_runtime.cli import config_reference
from agent_runtime.config import RuntimeConfig


def test_docs_configuration_md_is_current() -> None:
    current = config_reference.DOC_PATH.read_text(encoding="utf-8")
    assert current == config_reference.render(), (
        f"docs/configuration.md is stale: run `{config_reference.COMMAND}`"
    )


def test_check_mode_says_how_to_regenerate(capsys: pytest.CaptureFixture[str]) -> None:
    assert config_reference.main(["--check"]) == 0
    page = config_reference.render()
    original = config_reference.DOC_PATH
    try:
        config_reference.DOC_PATH = original.with_name("missing-configuration.md")
        assert config_reference.main(["--check"]) == 1
    finally:
        config_reference.DOC_PATH = original
    assert config_reference.COMMAND in capsys.readouterr().err
    assert page.startswith("# Configuration reference")


def test_every_key_of_every_section_is_listed() -> None:
    page = config_reference.render()
    for section, field in RuntimeConfig.model_fields.items():
        model = field.annotation
        assert isinstance(model, type)
        assert f"## `[{section}]`" in page
        for key in model.model_fields:  # a row, or a table of its own (`[llm.profiles.NAME]`)
            listed = f"| `{key}` |" in page or f"## `[{section}.{key}." in page
            assert listed, f"{section}.{key}"


def _env_value(default: str) -> str:
    text = default.strip("`")
    if text == "none":
        return "null"
    if text.startswith('"'):
        return str(json.loads(text))
    return text


def test_every_environment_variable_named_is_read_with_its_default() -> None:
    rows = [
        row
        for table in config_reference.tables()
        for row in table.rows
        if "<" not in row.env and row.default != "required"
    ]
    assert len(rows) > 40
    defaults = RuntimeConfig()
    for row in rows:
        loaded = load_config(env={row.env: _env_value(row.default)})
        assert loaded == defaults, f"{row.env}={row.default} did not load as the default"


def test_notes_come_from_the_comments_of_the_shipped_file() -> None:
    notes = config_reference.toml_notes(
        "[agent]\n"
        "max_tool_turns = 25      # turns before the run gives up\n"
        "log_content = false      # never log text unless true (also the\n"
        "                         # default of ObservableModel)\n"
        "# tool_timeout = 30.0    # seconds\n"
        "max_prompt_chars = 100000 # one space before the comment\n"
        'path = "a#b"  # a hash inside the value\n'
        "\n"
        "# What the next key is for,\n"
        "# in two lines.\n"
        '# default_profile = "scripted"\n'
    )
    assert notes[("agent", "max_tool_turns")] == "turns before the run gives up"
    assert notes[("agent", "log_content")] == (
        "never log text unless true (also the default of ObservableModel)"
    )
    assert notes[("agent", "tool_timeout")] == "seconds; e.g. `tool_timeout = 30.0`"
    assert notes[("agent", "max_prompt_chars")] == "one space before the comment"
    assert notes[("agent", "path")] == "a hash inside the value"
    assert notes[("agent", "default_profile")] == (
        'What the next key is for, in two lines.; e.g. `default_profile = "scripted"`'
    )
