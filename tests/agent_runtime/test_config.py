"""RuntimeConfig: shipped defaults, TOML loading, environment overrides and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_runtime import ConfigError
from agent_runtime.config import RuntimeConfig, load_config

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "runtime.toml"


def test_shipped_file_holds_exactly_the_model_defaults() -> None:
    assert load_config(SHIPPED, env={}) == RuntimeConfig()


def test_design_defaults_are_the_model_defaults() -> None:
    config = RuntimeConfig()
    assert (config.event_stream.max_queue, config.event_stream.overflow) == (10_000, "error")
    assert (config.subscription.max_queue, config.subscription.overflow) == (1000, "block")
    assert config.subscription.block_timeout == 30.0
    assert (config.agent.max_tool_concurrency, config.agent.max_tool_turns) == (8, 25)
    assert config.agent.tool_timeout is None
    assert config.agent.abort_grace == 0.25
    assert (config.agent.steering_mode, config.agent.follow_up_mode) == (
        "one_at_a_time",
        "one_at_a_time",
    )
    retry = config.retry
    assert (retry.max_retries, retry.base_delay, retry.max_delay, retry.max_retry_after) == (
        3,
        2.0,
        30.0,
        120.0,
    )
    assert (config.supervision.max_restarts, config.supervision.max_seconds) == (3, 5.0)
    assert config.telemetry.log_content is False
    assert set(config.llm.profiles) >= {"scripted", "openai", "anthropic", "gemini", "local"}
    assert config.llm.default_profile is None


def test_environment_overrides_the_file_and_coerces_types() -> None:
    config = load_config(
        SHIPPED,
        env={
            "AGENT_RUNTIME_AGENT__MAX_TOOL_TURNS": "10",
            "AGENT_RUNTIME_AGENT__TOOL_TIMEOUT": "2.5",
            "AGENT_RUNTIME_TELEMETRY__LOG_CONTENT": "true",
            "AGENT_RUNTIME_LLM__PROFILES__OPENAI__MODEL": "gpt-x",
            "UNRELATED": "ignored",
        },
    )
    assert config.agent.max_tool_turns == 10
    assert config.agent.tool_timeout == 2.5
    assert config.telemetry.log_content is True
    assert config.llm.profiles["openai"].model == "gpt-x"


def test_environment_null_restores_none() -> None:
    config = load_config(SHIPPED, env={"AGENT_RUNTIME_SUPERVISION__MAX_AGENTS": "null"})
    assert config.supervision.max_agents is None


def test_unknown_key_in_file_is_named_with_value_and_file(tmp_path: Path) -> None:
    path = tmp_path / "runtime.toml"
    path.write_text("[agent]\nmax_turns = 3\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    message = str(info.value)
    assert "agent.max_turns" in message
    assert "3" in message
    assert str(path) in message


def test_wrong_type_in_file_is_named_with_value_and_file(tmp_path: Path) -> None:
    path = tmp_path / "runtime.toml"
    path.write_text('[event_stream]\noverflow = "drop-old"\n')
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    message = str(info.value)
    assert "event_stream.overflow" in message
    assert "'drop-old'" in message
    assert str(path) in message


def test_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(SHIPPED, env={"AGENT_RUNTIME_AGENT__MAX_TOOL_TURNS": "many"})
    assert "AGENT_RUNTIME_AGENT__MAX_TOOL_TURNS" in str(info.value)
    assert "'many'" in str(info.value)


def test_unknown_section_from_environment_is_rejected() -> None:
    with pytest.raises(ConfigError, match="AGENT_RUNTIME_NOPE__X"):
        load_config(SHIPPED, env={"AGENT_RUNTIME_NOPE__X": "1"})


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "runtime.toml"
    path.write_text("[agent]\nmax_tool_turns = 0\nbogus = 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert "agent.max_tool_turns" in str(info.value)
    assert "agent.bogus" in str(info.value)


def test_missing_and_malformed_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "absent.toml", env={})
    broken = tmp_path / "broken.toml"
    broken.write_text("[agent\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(broken, env={})


def test_config_path_from_environment(tmp_path: Path) -> None:
    path = tmp_path / "custom.toml"
    path.write_text("[agent]\nmax_tool_turns = 7\n")
    config = load_config(env={"AGENT_RUNTIME_CONFIG": str(path)})
    assert config.agent.max_tool_turns == 7


def test_config_round_trips_through_json() -> None:
    config = RuntimeConfig()
    assert RuntimeConfig.model_validate_json(config.model_dump_json()) == config


# -- edge cases of loading (issue 11, item 16) ------------------------------------------------


def test_an_environment_variable_without_double_underscores_is_rejected_with_the_valid_form() -> (
    None
):
    with pytest.raises(ConfigError) as info:
        load_config(SHIPPED, env={"AGENT_RUNTIME_MAXTOOLTURNS": "5"})
    message = str(info.value)
    assert "AGENT_RUNTIME_MAXTOOLTURNS" in message
    assert "AGENT_RUNTIME_<SECTION>__<KEY>" in message
    assert "AGENT_RUNTIME_AGENT__MAX_TOOL_TURNS" in message


def test_the_config_path_variable_and_other_prefixes_are_not_overrides(tmp_path: Path) -> None:
    path = tmp_path / "custom.toml"
    path.write_text("[agent]\nmax_tool_turns = 7\n")
    env = {"AGENT_RUNTIME_CONFIG": str(path), "AGENT_RUNTIMEX": "1", "OTHER_RUNTIME_X": "1"}
    assert load_config(env=env).agent.max_tool_turns == 7


def test_a_file_with_a_utf8_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "runtime.toml"
    path.write_bytes("\ufeff[agent]\nmax_tool_turns = 7\n".encode())
    assert load_config(path, env={}).agent.max_tool_turns == 7


def test_a_directory_or_a_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"config file {tmp_path} is a directory"):
        load_config(tmp_path, env={})
    binary = tmp_path / "runtime.toml"
    binary.write_bytes(b"\xff\xfe[agent]\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(binary, env={})


@pytest.mark.parametrize("origin", ["file", "env"])
def test_a_default_profile_naming_no_profile_is_rejected_at_load(
    tmp_path: Path, origin: str
) -> None:
    path = tmp_path / "runtime.toml"
    path.write_text('[llm]\ndefault_profile = "antropic"\n' if origin == "file" else "")
    env = {"AGENT_RUNTIME_LLM__DEFAULT_PROFILE": "antropic"} if origin == "env" else {}
    with pytest.raises(ConfigError) as info:
        load_config(path, env=env)
    message = str(info.value)
    assert "llm.default_profile" in message and "'antropic'" in message
    assert "anthropic" in message  # the configured profiles are listed
    assert (str(path) if origin == "file" else "AGENT_RUNTIME_LLM__DEFAULT_PROFILE") in message


def test_a_default_profile_defined_in_the_same_file_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "runtime.toml"
    path.write_text('[llm]\ndefault_profile = "mine"\n[llm.profiles.mine]\nprovider = "scripted"\n')
    assert load_config(path, env={}).llm.default_profile == "mine"


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_memory_path_is_rejected_at_load(tmp_path: Path, value: str) -> None:
    path = tmp_path / "runtime.toml"
    path.write_text(f'[memory]\npath = "{value}"\n')
    with pytest.raises(ConfigError, match=r"memory\.path.*must name a file"):
        load_config(path, env={})


@pytest.mark.parametrize("key", ["abort_grace", "tool_timeout"])
def test_agent_seconds_must_be_finite(tmp_path: Path, key: str) -> None:
    path = tmp_path / "runtime.toml"
    path.write_text(f"[agent]\n{key} = inf\n")  # TOML has inf and nan literals
    with pytest.raises(ConfigError, match=rf"agent\.{key}.*finite"):
        load_config(path, env={})


@pytest.mark.parametrize(
    ("table", "line", "key"),
    [
        ("telemetry", 'log_content = "true"', "telemetry.log_content"),
        ("retry", 'max_retries = "5"', "retry.max_retries"),
        ("retry", 'max_delay = "5"', "retry.max_delay"),
        ("server", 'max_body_bytes = "1024"', "server.max_body_bytes"),
    ],
)
def test_a_toml_string_is_refused_for_a_boolean_or_a_number(
    tmp_path: Path, table: str, line: str, key: str
) -> None:
    path = tmp_path / "runtime.toml"
    path.write_text(f"[{table}]\n{line}\n")
    value = line.split(" = ")[1].strip('"')
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    message = str(info.value)
    assert f"'{key}'" in message and f"value {value!r}" in message and str(path) in message
    assert "without quotes" in message


def test_a_toml_float_is_refused_for_an_integer_and_an_integer_taken_for_a_float(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runtime.toml"
    path.write_text("[retry]\nmax_retries = 5.0\n")
    with pytest.raises(ConfigError, match=r"'retry\.max_retries': value 5\.0 in .*whole number"):
        load_config(path, env={})
    path.write_text("[retry]\nmax_delay = 5\n")
    assert load_config(path, env={}).retry.max_delay == 5.0


def test_environment_strings_still_parse_to_the_keys_type_over_a_file(tmp_path: Path) -> None:
    path = tmp_path / "runtime.toml"
    path.write_text('[retry]\nmax_retries = "5"\n[telemetry]\nlog_content = false\n')
    config = load_config(
        path,
        env={
            "AGENT_RUNTIME_RETRY__MAX_RETRIES": "4",  # replaces the file's string
            "AGENT_RUNTIME_TELEMETRY__LOG_CONTENT": "true",
            "AGENT_RUNTIME_RETRY__MAX_DELAY": "7.5",
        },
    )
    assert (config.retry.max_retries, config.retry.max_delay) == (4, 7.5)
    assert config.telemetry.log_content is True


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "Infinity"])
@pytest.mark.parametrize("key", ["RETRY__MAX_DELAY", "RETRY__BASE_DELAY", "LLM__TIMEOUT"])
def test_infinity_and_nan_from_the_environment_are_refused(value: str, key: str) -> None:
    variable = f"AGENT_RUNTIME_{key}"
    with pytest.raises(ConfigError) as info:
        load_config(SHIPPED, env={variable: value})
    message = str(info.value)
    assert f"'{key.lower().replace('__', '.')}'" in message
    assert f"value {value!r}" in message and f"environment variable {variable}" in message
    assert "finite" in message


@pytest.mark.parametrize(
    ("table", "key"),
    [("retry", "max_delay"), ("llm", "request_timeout"), ("supervision", "max_seconds")],
)
@pytest.mark.parametrize("value", ["inf", "nan"])
def test_infinity_and_nan_in_the_file_are_refused_for_every_number(
    tmp_path: Path, table: str, key: str, value: str
) -> None:
    path = tmp_path / "runtime.toml"
    path.write_text(f"[{table}]\n{key} = {value}\n")
    with pytest.raises(ConfigError, match=rf"'{table}\.{key}': value {value} in .*finite"):
        load_config(path, env={})
