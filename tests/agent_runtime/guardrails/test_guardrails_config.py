"""`[guardrails.ROLE] use = ["module:Class", ...]`: checked when the config loads (a bad entry
is named), and the guardrails of that role's agents started without `guardrails=`."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_runtime import ConfigError, GuardrailTripped, Runtime
from agent_runtime.config import load_config
from agent_runtime.testing import ScriptedModel

GOOD = "tests.agent_runtime.guardrails.configured:NoPasswords"


def config_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "runtime.toml"
    path.write_text(body, encoding="utf-8")
    return path


def test_a_role_table_lists_its_guardrails(tmp_path: Path) -> None:
    config = load_config(config_file(tmp_path, f'[guardrails.support]\nuse = ["{GOOD}"]\n'), env={})
    assert config.guardrails.for_role("support") == (GOOD,)
    assert config.guardrails.for_role("research") == ()


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("configured.NoPasswords", "is not of the form 'module:Class'"),
        ("no_such_module_xyz:Guard", "module 'no_such_module_xyz' cannot be imported"),
        ("tests.agent_runtime.guardrails.configured:Missing", "has no 'Missing'"),
        ("tests.agent_runtime.guardrails.configured:NOT_A_CLASS", "is not a subclass"),
        ("agent_runtime.config:RuntimeConfig", "is not a subclass of agent_runtime.Guardrail"),
    ],
)
def test_a_bad_entry_fails_the_load_naming_it(tmp_path: Path, entry: str, problem: str) -> None:
    path = config_file(tmp_path, f'[guardrails.support]\nuse = ["{GOOD}", "{entry}"]\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    message = str(caught.value)
    assert "guardrails.support.use" in message and repr(entry) in message
    assert problem in message


def test_an_unknown_key_in_a_role_table_is_rejected(tmp_path: Path) -> None:
    path = config_file(tmp_path, f'[guardrails.support]\nuses = ["{GOOD}"]\n')
    with pytest.raises(ConfigError, match=r"unknown config key 'guardrails\.support\.uses'"):
        load_config(path, env={})


def test_the_environment_can_set_a_role_s_guardrails() -> None:
    env = {"AGENT_RUNTIME_GUARDRAILS__SUPPORT__USE": f'["{GOOD}"]'}
    assert load_config(env=env).guardrails.for_role("support") == (GOOD,)


def test_an_agent_of_the_role_gets_the_configured_guardrails(tmp_path: Path) -> None:
    config = load_config(config_file(tmp_path, f'[guardrails.support]\nuse = ["{GOOD}"]\n'), env={})
    with Runtime.start(config) as runtime:
        support = runtime.start_agent(("s", "support", 0), model=ScriptedModel(["a"]))
        with pytest.raises(GuardrailTripped, match="mentions a password"):
            support.run("my password is x", timeout=10)
        other = runtime.start_agent(("s", "research", 0), model=ScriptedModel(["b"]))
        assert other.run("my password is x", timeout=10).text == "b"
        unguarded = runtime.start_agent(
            ("s", "support", 1), model=ScriptedModel(["c"]), guardrails=[]
        )
        assert unguarded.run("my password is x", timeout=10).text == "c"


def test_a_configured_class_that_needs_arguments_fails_the_start_naming_it(
    tmp_path: Path,
) -> None:
    spec = "tests.agent_runtime.guardrails.configured:NeedsArguments"
    config = load_config(config_file(tmp_path, f'[guardrails.support]\nuse = ["{spec}"]\n'), env={})
    with Runtime.start(config) as runtime:
        with pytest.raises(TypeError, match=f"guardrail '{spec}' cannot be created without"):
            runtime.start_agent(("s", "support", 0), model=ScriptedModel(["a"]))
        agent = runtime.start_agent(("s", "research", 0), model=ScriptedModel(["b"]))
        assert agent.run("hi", timeout=10).text == "b"  # the runtime goes on
