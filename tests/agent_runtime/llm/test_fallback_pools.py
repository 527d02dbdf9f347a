"""[llm.pools]: fallback pools over profiles, checked at load and built by from_config."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime import ConfigError
from agent_runtime.config import load_config
from agent_runtime.llm import ChatRequest, FallbackModel, ProviderError, from_config
from agent_runtime.messages import UserMessage
from agent_runtime.testing import MockProviderServer, ScriptedTurn


@pytest.fixture
def server() -> Iterator[MockProviderServer]:
    with MockProviderServer() as mock:
        yield mock


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "runtime.toml"
    path.write_text(text)
    return path


def two_profiles(server: MockProviderServer) -> str:
    url = server.base_url("openai")
    return (
        f'[llm.profiles.first]\nprovider = "openai_compatible"\nmodel = "m"\nbase_url = "{url}"\n'
        f'[llm.profiles.second]\nprovider = "openai_compatible"\nmodel = "m-large"\n'
        f'base_url = "{url}"\n'
    )


def test_a_pool_builds_a_fallback_model_that_fails_over_in_order(
    server: MockProviderServer, tmp_path: Path
) -> None:
    text = two_profiles(server) + '[llm.pools.both]\nmembers = ["first", "second"]\n'
    config = load_config(write(tmp_path, text), env={})
    model = from_config("both", config=config)
    assert isinstance(model, FallbackModel)
    server.enqueue(ScriptedTurn(error=ProviderError("down", status=503)), "from the second")
    response = model.generate_sync(ChatRequest(messages=[UserMessage(content="hi")]))
    assert response.text == "from the second"
    assert [r.json["model"] for r in server.requests] == ["m", "m-large"]


def test_the_default_profile_may_name_a_pool(server: MockProviderServer, tmp_path: Path) -> None:
    text = (
        '[llm]\ndefault_profile = "both"\n'
        + two_profiles(server)
        + '[llm.pools.both]\nmembers = ["second"]\nfailure_threshold = 1\nreset_timeout = 5.0\n'
    )
    config = load_config(write(tmp_path, text), env={})
    assert config.llm.pools["both"].failure_threshold == 1
    assert isinstance(from_config(config=config), FallbackModel)


@pytest.mark.parametrize(
    ("pool", "problem"),
    [
        ('members = ["first", "nope"]', r"llm\.pools\.both\.members.*'nope'.*names no configured"),
        ('members = ["first", "first"]', r"llm\.pools\.both\.members.*more than once"),
        ("members = []", r"llm\.pools\.both\.members"),
        ('members = ["first"]\nfailure_threshold = 0', r"llm\.pools\.both\.failure_threshold"),
    ],
)
def test_a_bad_pool_is_rejected_at_load_naming_the_key(
    server: MockProviderServer, tmp_path: Path, pool: str, problem: str
) -> None:
    text = two_profiles(server) + f"[llm.pools.both]\n{pool}\n"
    with pytest.raises(ConfigError, match=problem):
        load_config(write(tmp_path, text), env={})


def test_a_pool_named_like_a_profile_is_rejected(
    server: MockProviderServer, tmp_path: Path
) -> None:
    text = two_profiles(server) + '[llm.pools.first]\nmembers = ["second"]\n'
    with pytest.raises(ConfigError, match=r"llm\.pools\.first.*also the name of a profile"):
        load_config(write(tmp_path, text), env={})
