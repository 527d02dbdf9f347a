"""`from_config`: every shipped profile builds its adapter, offline, or names the missing key."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agent_runtime import ConfigError
from agent_runtime.config import ModelPricingConfig, ModelProfile, RuntimeConfig, load_config
from agent_runtime.llm import (
    AnthropicModel,
    ChatModel,
    ChatRequest,
    GeminiModel,
    OpenAICompatibleModel,
    from_config,
    register_profile_kind,
)
from agent_runtime.messages import Usage, UserMessage
from agent_runtime.testing import MockProviderServer, ScriptedModel, ScriptedTurn

SHIPPED = Path(__file__).resolve().parents[3] / "config" / "runtime.toml"

HOSTED = [
    pytest.param(
        "openai",
        OpenAICompatibleModel,
        "gpt-4o-mini",
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
        id="openai",
    ),
    pytest.param(
        "anthropic",
        AnthropicModel,
        "claude-sonnet-4-5",
        "https://api.anthropic.com",
        "ANTHROPIC_API_KEY",
        id="anthropic",
    ),
    pytest.param(
        "gemini",
        GeminiModel,
        "gemini-2.5-flash",
        "https://generativelanguage.googleapis.com",
        "GEMINI_API_KEY",
        id="gemini",
    ),
]


@pytest.fixture
def shipped() -> RuntimeConfig:
    """The configuration as shipped in config/runtime.toml, without environment overrides."""
    return load_config(SHIPPED, env={})


def with_profile(config: RuntimeConfig, name: str, **changes: Any) -> RuntimeConfig:
    profiles = dict(config.llm.profiles)
    profiles[name] = profiles[name].model_copy(update=changes)
    llm = config.llm.model_copy(update={"profiles": profiles})
    return config.model_copy(update={"llm": llm})


@pytest.mark.parametrize(("name", "cls", "model", "base_url", "env"), HOSTED)
def test_a_hosted_profile_builds_its_adapter_when_its_key_is_set(
    shipped: RuntimeConfig,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    cls: type[Any],
    model: str,
    base_url: str,
    env: str,
) -> None:
    monkeypatch.setenv(env, "key-from-env")
    built = from_config(name, config=shipped)
    assert type(built) is cls
    assert (built.info.provider, built.info.model) == (name, model)
    assert built.base_url == base_url


@pytest.mark.parametrize(("name", "cls", "model", "base_url", "env"), HOSTED)
def test_a_hosted_profile_without_its_key_names_the_environment_variable(
    shipped: RuntimeConfig,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    cls: type[Any],
    model: str,
    base_url: str,
    env: str,
) -> None:
    monkeypatch.delenv(env, raising=False)
    with pytest.raises(ConfigError, match=f"set the environment variable {env}$"):
        from_config(name, config=shipped)


def test_the_scripted_profile_echoes_offline(shipped: RuntimeConfig) -> None:
    model = from_config("scripted", config=shipped)
    assert isinstance(model, ScriptedModel)
    assert model.prompt_sync("hello", timeout=5) == "echo: hello"


def test_without_a_name_or_a_default_profile_the_error_says_how_to_pick_one(
    shipped: RuntimeConfig,
) -> None:
    assert shipped.llm.default_profile is None
    with pytest.raises(ConfigError, match="no model profile given and no default configured") as e:
        from_config(config=shipped)
    for fix in (
        "pass a profile name",
        "[llm] default_profile",
        "AGENT_RUNTIME_LLM__DEFAULT_PROFILE",
    ):
        assert fix in str(e.value)


def test_without_a_name_the_configured_default_profile_is_built() -> None:
    config = load_config(SHIPPED, env={"AGENT_RUNTIME_LLM__DEFAULT_PROFILE": "scripted"})
    model = from_config(config=config)
    assert isinstance(model, ScriptedModel)
    assert model.prompt_sync("hello", timeout=5) == "echo: hello"


def test_the_local_profile_is_a_keyless_server_on_the_loopback(
    shipped: RuntimeConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = from_config("local", config=shipped)
    assert type(model) is OpenAICompatibleModel
    assert model.base_url == "http://127.0.0.1:8080/v1"
    assert (model.info.provider, model.info.model) == ("openai_compatible", "local")


def test_the_local_profile_needs_no_key_and_never_sends_the_openai_key(
    shipped: RuntimeConfig, monkeypatch: pytest.MonkeyPatch, server: MockProviderServer
) -> None:
    config = with_profile(shipped, "local", base_url=server.base_url("openai"))
    server.enqueue("without a key", "still without")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert from_config("local", config=config).prompt_sync("hi", timeout=5) == "without a key"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-for-openai-only")
    assert from_config("local", config=config).prompt_sync("hi", timeout=5) == "still without"
    assert [r.headers.get("authorization") for r in server.requests] == [None, None]


def test_a_profile_key_is_read_again_on_every_request(
    shipped: RuntimeConfig, monkeypatch: pytest.MonkeyPatch, server: MockProviderServer
) -> None:
    config = with_profile(shipped, "anthropic", base_url=server.base_url("anthropic"))
    server.enqueue("one", "two")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-first")
    model = from_config("anthropic", config=config)
    model.prompt_sync("hi", timeout=5)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-rotated")
    model.prompt_sync("hi", timeout=5)
    assert [r.headers["x-api-key"] for r in server.requests] == ["sk-first", "sk-rotated"]


def test_profile_pricing_gives_the_cost_of_a_response(
    shipped: RuntimeConfig, monkeypatch: pytest.MonkeyPatch, server: MockProviderServer
) -> None:
    pricing = ModelPricingConfig(input=2.0, output=8.0)
    config = with_profile(shipped, "gemini", base_url=server.base_url("gemini"), pricing=pricing)
    monkeypatch.setenv("GEMINI_API_KEY", "g-key")
    server.enqueue(ScriptedTurn(text="priced", usage=Usage(input_tokens=1000, output_tokens=100)))
    model = from_config("gemini", config=config)
    response = model.generate_sync(ChatRequest(messages=[UserMessage(content="hi")]), timeout=5)
    assert response.cost == pytest.approx((1000 * 2.0 + 100 * 8.0) / 1e6)


def test_from_config_with_only_a_name_reads_the_shipped_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(SHIPPED.parents[1])
    monkeypatch.delenv("AGENT_RUNTIME_CONFIG", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
    model = from_config("anthropic")
    assert type(model) is AnthropicModel and model.info.model == "claude-sonnet-4-5"


def test_the_thinking_budgets_of_the_config_reach_the_provider(
    shipped: RuntimeConfig, monkeypatch: pytest.MonkeyPatch, server: MockProviderServer
) -> None:
    config = with_profile(shipped, "anthropic", base_url=server.base_url("anthropic"))
    budgets = config.thinking_budgets.model_copy(update={"high": 12345})
    config = config.model_copy(update={"thinking_budgets": budgets})
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env")
    server.enqueue("thought about it")
    request = ChatRequest(messages=[UserMessage(content="hi")], reasoning="high")
    from_config("anthropic", config=config).generate_sync(request, timeout=5)
    assert server.requests[0].json["thinking"] == {"type": "enabled", "budget_tokens": 12345}


def with_profiles(**profiles: dict[str, Any]) -> RuntimeConfig:
    return RuntimeConfig.model_validate({"llm": {"profiles": profiles}})


def test_a_registered_profile_kind_builds_through_its_builder() -> None:
    seen: list[tuple[str, ModelProfile]] = []

    def build(name: str, profile: ModelProfile, config: RuntimeConfig) -> ChatModel:
        seen.append((name, profile))
        return ScriptedModel(["from the custom kind"], model=profile.model)

    register_profile_kind("test_factory_custom", build)
    config = with_profiles(mine={"provider": "test_factory_custom", "model": "m1"})
    model = from_config("mine", config=config)
    assert model.prompt_sync("hi", timeout=5) == "from the custom kind"
    assert [(name, profile.model) for name, profile in seen] == [("mine", "m1")]


def test_an_unregistered_profile_kind_says_how_to_register_it() -> None:
    config = with_profiles(odd={"provider": "test_factory_unregistered"})
    with pytest.raises(
        ConfigError,
        match=r"profile kind 'test_factory_unregistered' of model profile 'odd' is not "
        r"registered .*import the module that registers it",
    ):
        from_config("odd", config=config)


def test_a_profile_plugin_module_is_imported_to_register_its_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "test_factory_plugin.py").write_text(
        textwrap.dedent(
            """
            from agent_runtime.llm import register_profile_kind
            from agent_runtime.testing import ScriptedModel

            register_profile_kind(
                "test_factory_plugged", lambda name, profile, config: ScriptedModel(["plugged"])
            )
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    config = with_profiles(p={"provider": "test_factory_plugged", "plugin": "test_factory_plugin"})
    assert from_config("p", config=config).prompt_sync("hi", timeout=5) == "plugged"


def test_a_profile_plugin_that_registers_nothing_is_named() -> None:
    config = with_profiles(p={"provider": "test_factory_missing", "plugin": "json"})
    with pytest.raises(
        ConfigError, match=r"plugin module 'json' did not register .*'test_factory_missing'"
    ):
        from_config("p", config=config)


def test_a_profile_plugin_that_cannot_be_imported_is_named() -> None:
    config = with_profiles(p={"provider": "test_factory_missing", "plugin": "no_such_plugin_mod"})
    with pytest.raises(ConfigError, match="plugin module 'no_such_plugin_mod' cannot be imported"):
        from_config("p", config=config)


def test_the_scripted_profile_builds_without_importing_agent_runtime_testing_first() -> None:
    script = textwrap.dedent(
        f"""
        import sys
        from agent_runtime.config import load_config
        from agent_runtime.llm import from_config

        assert "agent_runtime.testing" not in sys.modules
        model = from_config("scripted", config=load_config({str(SHIPPED)!r}, env={{}}))
        print(model.prompt_sync("offline", timeout=5))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "echo: offline"), done.stderr
