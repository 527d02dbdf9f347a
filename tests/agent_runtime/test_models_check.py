"""`agent-runtime models check`: shipped model names against each provider's list_models()."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime.cli import main
from agent_runtime.cli._models import served_as
from agent_runtime.testing import MockProviderServer

SERVED = ["gpt-4o-mini", "claude-sonnet-4-5-20250929", "gemini-2.5-flash", "local", "m"]


@pytest.fixture
def server() -> Iterator[MockProviderServer]:
    with MockProviderServer() as mock:
        mock.models = list(SERVED)
        yield mock


@pytest.fixture
def config_file(
    server: MockProviderServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Every built-in profile, pointed at the mock server (so the package's names are checked
    there too), plus `mine` with a model name of its own."""
    monkeypatch.setenv("MOCK_KEY", "test-key")
    path = tmp_path / "runtime.toml"
    path.write_text(
        f"""
[llm.profiles.scripted]
provider = "scripted"
model = "scripted"
plugin = "agent_runtime.testing"

[llm.profiles.openai]
provider = "openai"
model = "gpt-4o-mini"
api_key_env = "MOCK_KEY"
base_url = "{server.base_url("openai")}"

[llm.profiles.anthropic]
provider = "anthropic"
model = "claude-sonnet-4-5"
api_key_env = "MOCK_KEY"
base_url = "{server.base_url("anthropic")}"

[llm.profiles.gemini]
provider = "gemini"
model = "gemini-2.5-flash"
api_key_env = "MOCK_KEY"
base_url = "{server.base_url("gemini")}"

[llm.profiles.local]
provider = "openai_compatible"
model = "local"
base_url = "{server.base_url("openai")}"

[llm.profiles.mine]
provider = "openai_compatible"
model = "m"
base_url = "{server.base_url("openai")}"
"""
    )
    return path


def check(path: Path, *args: str) -> int:
    return main(["--config", str(path), "models", "check", *args])


def lines(capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """{"<profile> <model>": the rest of its line}"""
    out = capsys.readouterr().out.splitlines()
    parsed = {}
    for line in out[:-1]:
        profile, model, rest = line.split(maxsplit=2)
        parsed[f"{profile} {model}"] = rest
    return parsed


def test_every_served_name_passes_with_exit_status_0(
    config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check(config_file) == 0
    seen = lines(capsys)
    assert seen["openai gpt-4o-mini"] == "(config+package)  served"
    assert seen["anthropic claude-sonnet-4-5"] == (
        "(config+package)  served: as claude-sonnet-4-5-20250929"
    )
    assert seen["gemini gemini-2.5-flash"] == "(config+package)  served"
    assert seen["mine m"] == "(config)  served"
    assert seen["scripted scripted"].endswith(
        "not checked: profile kind 'scripted' lists no models"
    )


def test_a_stale_package_default_is_reported_and_fails_the_check(
    server: MockProviderServer, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = config_file.read_text().replace('model = "gemini-2.5-flash"', 'model = "m"')
    config_file.write_text(text)
    server.models = [m for m in SERVED if m != "gemini-2.5-flash"] + ["gemini-2.5-flash-lite"]
    assert check(config_file) == 1
    seen = lines(capsys)
    assert seen["gemini m"] == "(config)  served"
    stale = seen["gemini gemini-2.5-flash"]
    assert stale.startswith("(package)  STALE: not among the 5 models the provider lists")
    assert "close: gemini-2.5-flash-lite" in stale


def test_a_stale_configured_name_fails_the_check(
    config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_file.write_text(config_file.read_text().replace('model = "m"', 'model = "m-retired"'))
    assert check(config_file) == 1
    assert lines(capsys)["mine m-retired"].startswith("(config)  STALE")
    assert check(config_file, "--profile", "openai") == 0  # the other profiles are fine


def test_profile_asks_only_that_profiles_provider(
    server: MockProviderServer, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check(config_file, "--profile", "anthropic") == 0
    assert list(lines(capsys)) == ["anthropic claude-sonnet-4-5"]
    assert [(r.method, r.path, r.format) for r in server.requests] == [
        ("GET", "/v1/models", "anthropic")
    ]


def test_an_unknown_profile_is_an_error_naming_the_known_ones(
    config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check(config_file, "--profile", "antropic") == 2
    err = capsys.readouterr().err
    assert "unknown model profile 'antropic'" in err and "anthropic" in err


def test_a_profile_asked_for_that_cannot_be_checked_is_an_error(
    config_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert check(config_file, "--profile", "scripted") == 2
    monkeypatch.delenv("MOCK_KEY")
    assert check(config_file, "--profile", "openai") == 2
    assert "set the environment variable MOCK_KEY" in lines(capsys)["openai gpt-4o-mini"]
    assert check(config_file) == 0  # unasked, a profile without its key is only reported


def test_a_provider_that_cannot_list_its_models_is_an_error(
    server: MockProviderServer, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = server.base_url("openai") + "/nowhere"
    text = config_file.read_text().replace(
        f'model = "m"\nbase_url = "{server.base_url("openai")}"',
        f'model = "m"\nbase_url = "{wrong}"',
    )
    config_file.write_text(text)
    assert check(config_file, "--profile", "mine") == 2
    assert lines(capsys)["mine m"].startswith("(config)  FAILED: ")


@pytest.mark.parametrize(
    ("name", "listed", "served"),
    [
        ("m", ["m", "m-large"], "m"),
        ("claude-x", ["claude-x-20240101", "claude-x-20250101"], "claude-x-20250101"),
        ("gpt-x", ["gpt-x-2024-08-06"], "gpt-x-2024-08-06"),
        ("gpt-x", ["gpt-x-mini"], None),
        ("claude-x", ["claude-x-1-20250101"], None),
    ],
)
def test_a_name_is_served_by_itself_or_a_dated_snapshot_of_it(
    name: str, listed: list[str], served: str | None
) -> None:
    assert served_as(name, listed) == served
