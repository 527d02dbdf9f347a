"""`memory.compact_above_bytes` and `memory.compaction_profile`: off by default and checked when
the configuration is loaded (what they do in a runtime: tests/agent_runtime/test_config_keys.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_runtime import ConfigError, Runtime
from agent_runtime.config import RuntimeConfig, load_config
from agent_runtime.memory import open_session_memory

SHIPPED = Path(__file__).resolve().parents[3] / "config" / "runtime.toml"


def load(**env: str) -> RuntimeConfig:
    return load_config(SHIPPED, env={f"AGENT_RUNTIME_{k.upper()}": v for k, v in env.items()})


def test_automatic_compaction_is_off_by_default() -> None:
    config = load()
    assert (config.memory.compact_above_bytes, config.memory.compaction_profile) == (None, None)
    with open_session_memory(config) as memory:
        assert memory.auto_compaction is None


def test_a_threshold_without_a_profile_is_rejected_at_load() -> None:
    expected = r"memory\.compact_above_bytes.*memory\.compaction_profile must name"
    with pytest.raises(ConfigError, match=expected):
        load(memory__compact_above_bytes="1000")


def test_an_unknown_compaction_profile_is_rejected_at_load() -> None:
    with pytest.raises(
        ConfigError, match=r"memory\.compaction_profile.*'nope'.*configured profiles: anthropic"
    ):
        load(memory__compact_above_bytes="1000", memory__compaction_profile="nope")


@pytest.mark.parametrize("value", ["0", "-5", "big"])
def test_a_threshold_that_is_no_positive_int_is_rejected_at_load(value: str) -> None:
    with pytest.raises(ConfigError, match=r"memory\.compact_above_bytes"):
        load(memory__compact_above_bytes=value, memory__compaction_profile="scripted")


def test_a_profile_whose_model_cannot_be_built_fails_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = load(memory__compact_above_bytes="1000", memory__compaction_profile="openai")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        Runtime.start(config)
