"""ProviderConfiguration: preview/apply edits of [llm] profiles and pools in the config file."""

from __future__ import annotations

import os
import re
import shutil
import threading
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from agent_runtime.config import load_config
from agent_runtime.llm import (
    AddPoolMember,
    AddProfile,
    ConcurrentConfigEdit,
    ConfigPreview,
    ConfirmationRequired,
    InvalidConfigChange,
    ProviderConfiguration,
    RemovePoolMember,
    RemoveProfile,
    UpdateProfile,
)

SHIPPED = Path(__file__).resolve().parents[3] / "config" / "runtime.toml"
LOCAL = AddProfile(
    name="mine",
    profile={"provider": "openai_compatible", "model": "qwen", "base_url": "http://127.0.0.1:9/v1"},
)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    copy = tmp_path / "runtime.toml"
    shutil.copyfile(SHIPPED, copy)
    return copy


@pytest.fixture
def config(path: Path) -> ProviderConfiguration:
    return ProviderConfiguration(path)


def comments(text: str) -> list[str]:
    return [line[line.index("#") :] for line in text.splitlines() if "#" in line]


def test_an_applied_change_is_in_the_file_load_config_reads(
    config: ProviderConfiguration, path: Path
) -> None:
    config.apply(config.preview(LOCAL))
    config.apply(config.preview(AddPoolMember(pool="cheap", profile="mine")))
    config.apply(config.preview(AddPoolMember(pool="cheap", profile="openai", position=0)))
    config.apply(config.preview(UpdateProfile(name="openai", model="gpt-5-mini")))
    loaded = load_config(path, env={})
    assert loaded.llm.profiles["mine"].base_url == "http://127.0.0.1:9/v1"
    assert loaded.llm.profiles["openai"].model == "gpt-5-mini"
    assert loaded.llm.profiles["openai"].api_key_env == "OPENAI_API_KEY"
    assert loaded.llm.pools["cheap"].members == ["openai", "mine"]
    assert set(loaded.llm.profiles) == {
        "scripted",
        "openai",
        "anthropic",
        "gemini",
        "local",
        "mine",
    }


def test_comments_and_untouched_lines_survive_every_kind_of_change(
    config: ProviderConfiguration, path: Path
) -> None:
    before = path.read_text()
    config.apply(config.preview(LOCAL))
    config.apply(config.preview(UpdateProfile(name="scripted", model="echo", provider="x")))
    config.apply(config.preview(UpdateProfile(name="anthropic", api_key_env=None)))
    config.apply(config.preview(AddPoolMember(pool="p", profile="mine")))
    removal = config.preview(RemovePoolMember(pool="p", profile="mine"))
    config.apply(removal, confirm=removal.confirmation)
    removal = config.preview(RemoveProfile(name="gemini"))
    config.apply(removal, confirm=removal.confirmation)
    after = path.read_text()
    assert comments(after) == comments(before)
    assert 'provider = "x"     # the kind: openai | openai_compatible' in after  # a value's own
    assert '[memory]\nstore = "sqlite"          # sqlite | memory' in after
    untouched = before.split("[llm]")[0]
    assert after.startswith(untouched)


def test_a_preview_writes_nothing_and_shows_the_diff(
    config: ProviderConfiguration, path: Path
) -> None:
    before = path.read_bytes()
    preview = config.preview(UpdateProfile(name="openai", model="gpt-5-mini"))
    assert path.read_bytes() == before
    assert '-model = "gpt-4o-mini"\n+model = "gpt-5-mini"\n' in preview.diff
    assert preview.summary == "update profile openai: set model"
    assert preview.confirmation is None and not preview.destructive


def test_an_edit_previewed_at_an_older_revision_is_rejected(
    config: ProviderConfiguration, path: Path
) -> None:
    first = config.preview(UpdateProfile(name="openai", model="gpt-5-mini"))
    second = config.preview(UpdateProfile(name="openai", model="gpt-4.1"))
    assert first.revision == second.revision
    config.apply(first)
    written = path.read_bytes()
    with pytest.raises(ConcurrentConfigEdit) as info:
        config.apply(second)
    assert path.read_bytes() == written
    assert info.value.expected == second.revision != info.value.actual
    assert "preview the change again" in str(info.value)


def test_a_hand_edit_after_the_preview_is_not_overwritten(
    config: ProviderConfiguration, path: Path
) -> None:
    preview = config.preview(LOCAL)
    path.write_text(path.read_text() + "\n# edited by hand\n")
    with pytest.raises(ConcurrentConfigEdit):
        config.apply(preview)
    assert path.read_text().endswith("# edited by hand\n")
    assert "mine" not in load_config(path, env={}).llm.profiles


def test_of_edits_applied_at_once_from_one_revision_exactly_one_is_written(
    config: ProviderConfiguration, path: Path
) -> None:
    previews = [
        ProviderConfiguration(path).preview(UpdateProfile(name="openai", model=f"model-{i}"))
        for i in range(6)
    ]
    start = threading.Barrier(len(previews))
    outcomes: list[str] = []

    def apply(preview: ConfigPreview) -> None:
        start.wait(timeout=10)
        try:
            ProviderConfiguration(path).apply(preview)
            outcomes.append(preview.change.model)
        except ConcurrentConfigEdit:
            outcomes.append("rejected")

    threads = [threading.Thread(target=apply, args=(p,)) for p in previews]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    winners = [outcome for outcome in outcomes if outcome != "rejected"]
    assert len(outcomes) == 6 and len(winners) == 1
    assert load_config(path, env={}).llm.profiles["openai"].model == winners[0]


@pytest.mark.parametrize(
    "confirm", [None, "yes", "remove profile Gemini", "remove profile gemini "]
)
def test_a_destructive_change_without_its_exact_confirmation_is_refused(
    config: ProviderConfiguration, path: Path, confirm: str | None
) -> None:
    before = path.read_bytes()
    preview = config.preview(RemoveProfile(name="gemini"))
    assert preview.destructive and preview.confirmation == "remove profile gemini"
    with pytest.raises(ConfirmationRequired) as info:
        config.apply(preview, confirm=confirm)
    assert info.value.expected == "remove profile gemini"
    assert "confirm='remove profile gemini'" in str(info.value)
    assert path.read_bytes() == before


def test_a_destructive_change_with_its_confirmation_is_written(
    config: ProviderConfiguration, path: Path
) -> None:
    config.apply(config.preview(AddPoolMember(pool="hosted", profile="anthropic")))
    preview = config.preview(RemovePoolMember(pool="hosted", profile="anthropic"))
    assert preview.confirmation == "remove anthropic from pool hosted"
    assert "pool hosted is removed" in preview.summary  # it was its last member
    config.apply(preview, confirm="remove anthropic from pool hosted")
    assert load_config(path, env={}).llm.pools == {}
    assert path.read_bytes() == SHIPPED.read_bytes()  # added, then removed: as it was


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (AddProfile(name="openai", profile={"provider": "openai"}), "profile 'openai' exists"),
        (UpdateProfile(name="opneai", model="x"), "no profile 'opneai' to update"),
        (UpdateProfile(name="openai"), "must set or remove at least one field"),
        (UpdateProfile(name="openai", provider=None), "provider cannot be removed"),
        (RemoveProfile(name="nope"), "no profile 'nope' to remove"),
        (AddPoolMember(pool="p", profile="nope"), "no profile 'nope' to add to pool 'p'"),
        (AddPoolMember(pool="openai", profile="anthropic"), "llm.pools.openai: is also the name"),
        (RemovePoolMember(pool="p", profile="openai"), "no pool 'p'"),
        ({"type": "add_profile", "name": "a b", "profile": {"provider": "x"}}, "name: String"),
        ({"type": "add_profile", "name": "x", "profile": {}}, "profile.provider: Field required"),
        ({"type": "rename_profile", "name": "x"}, "does not match any of the expected tags"),
        ({"type": "update_profile", "name": "openai", "pricing": {"input": -1}}, "pricing.input"),
    ],
)
def test_an_invalid_change_names_the_problem_and_writes_nothing(
    config: ProviderConfiguration, path: Path, change: object, problem: str
) -> None:
    before = path.read_bytes()
    with pytest.raises(InvalidConfigChange) as info:
        config.preview(change)
    assert problem in str(info.value)
    assert path.read_bytes() == before


def test_removing_a_profile_a_pool_or_the_default_uses_is_refused(
    config: ProviderConfiguration, path: Path
) -> None:
    config.apply(config.preview(AddPoolMember(pool="hosted", profile="openai")))
    with pytest.raises(InvalidConfigChange, match="member of pool\\(s\\) hosted"):
        config.preview(RemoveProfile(name="openai"))
    path.write_text(path.read_text().replace("[llm]\n", '[llm]\ndefault_profile = "gemini"\n'))
    with pytest.raises(InvalidConfigChange, match=r"llm\.default_profile: names no configured"):
        config.preview(RemoveProfile(name="gemini"))


SECRET = "sk-live-0123456789abcdef"


@pytest.mark.parametrize(
    "change",
    [
        {"type": "add_profile", "name": "x", "profile": {"provider": "openai", "api_key": SECRET}},
        {
            "type": "add_profile",
            "name": "x",
            "profile": {"provider": "openai", "api_key_env": SECRET},
        },
        {"type": "update_profile", "name": "openai", "api_key_env": SECRET},
        {"type": "update_profile", "name": "openai", "api_key": SECRET},
        {"type": "update_profile", "name": "openai", "base_url": f"https://u:{SECRET}@h/v1"},
        {"type": "update_profile", "name": "openai", "base_url": f"https://h/v1?key={SECRET}"},
    ],
)
def test_a_change_carrying_a_credential_is_refused_without_repeating_it(
    config: ProviderConfiguration, change: dict[str, object]
) -> None:
    with capture_logs() as logs, pytest.raises(InvalidConfigChange) as info:
        config.preview(change)
    message = str(info.value)
    assert SECRET not in message and SECRET not in repr(info.value.problems)
    assert SECRET not in repr(logs)
    assert re.search("api_key|base_url", message)


def test_models_built_with_a_credential_do_not_show_it_either() -> None:
    with pytest.raises(ValueError) as info:
        UpdateProfile(name="openai", api_key_env=SECRET)
    assert SECRET not in str(info.value)
    assert "api_key_env must name the environment variable" in str(info.value)


def test_credentials_elsewhere_in_the_file_are_masked_in_previews_and_logs(
    config: ProviderConfiguration, path: Path
) -> None:
    text = path.read_text().replace(
        '[memory]\nstore = "sqlite"',
        f'[memory]\ndsn = "postgresql://agent:{SECRET}@db/x"\nstore = "sqlite"',
    )
    path.write_text(text)
    with capture_logs() as logs:
        preview = config.preview(LOCAL)  # inserted right before [memory]: its lines are context
        config.apply(preview)
    assert "dsn = " in preview.diff and SECRET not in preview.diff
    assert SECRET not in repr(preview) and SECRET not in repr(logs)
    assert [entry["event"] for entry in logs] == ["llm.config.changed"]
    assert SECRET in path.read_text()  # masked in what is shown, kept in the file


def test_a_file_without_profiles_keeps_the_built_in_ones(tmp_path: Path) -> None:
    path = tmp_path / "runtime.toml"
    path.write_text("# mine\n[agent]\nmax_tool_turns = 5  # short runs\n")
    config = ProviderConfiguration(path)
    preview = config.preview(LOCAL)
    assert "built-in profiles are written out first" in preview.summary
    config.apply(preview)
    loaded = load_config(path, env={})
    assert set(loaded.llm.profiles) == {
        "scripted",
        "openai",
        "anthropic",
        "gemini",
        "local",
        "mine",
    }
    assert loaded.agent.max_tool_turns == 5
    assert path.read_text().startswith("# mine\n[agent]\nmax_tool_turns = 5  # short runs\n")


def test_a_byte_order_mark_and_the_permission_bits_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "runtime.toml"
    path.write_bytes(b"\xef\xbb\xbf" + SHIPPED.read_bytes())
    os.chmod(path, 0o640)
    config = ProviderConfiguration(path)
    config.apply(config.preview(LOCAL))
    assert path.read_bytes().startswith(b"\xef\xbb\xbf# Defaults")
    assert path.stat().st_mode & 0o777 == 0o640
    assert "mine" in load_config(path, env={}).llm.profiles


def test_read_gives_the_profiles_pools_and_revision_that_preview_uses(
    config: ProviderConfiguration,
) -> None:
    snapshot = config.read()
    assert snapshot.llm.profiles["openai"].model == "gpt-4o-mini" and snapshot.llm.pools == {}
    assert config.preview(LOCAL).revision == snapshot.revision
    revision = config.apply(config.preview(LOCAL))
    assert config.read().revision == revision != snapshot.revision


def test_an_invalid_or_missing_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    from agent_runtime import ConfigError

    with pytest.raises(ConfigError, match="does not exist"):
        ProviderConfiguration(tmp_path / "absent.toml").preview(LOCAL)
    broken = tmp_path / "broken.toml"
    broken.write_text("[agent]\nmax_tool_turns = 0\n")
    with pytest.raises(ConfigError, match=r"agent\.max_tool_turns") as info:
        ProviderConfiguration(broken).preview(LOCAL)
    assert not isinstance(info.value, InvalidConfigChange)  # the file, not the change


def test_a_preview_of_another_file_is_refused(
    config: ProviderConfiguration, tmp_path: Path
) -> None:
    other = tmp_path / "other.toml"
    shutil.copyfile(SHIPPED, other)
    with pytest.raises(ValueError, match="this preview is of"):
        ProviderConfiguration(other).apply(config.preview(LOCAL))


def test_a_change_round_trips_through_json(config: ProviderConfiguration) -> None:
    preview = config.preview(UpdateProfile(name="openai", model="m", pricing={"input": 1.0}))
    again = ConfigPreview.model_validate_json(preview.model_dump_json())
    assert again == preview
    assert again.change.updates() == preview.change.updates()


def test_a_file_whose_string_stands_for_a_number_is_refused_as_load_config_refuses_it(
    tmp_path: Path,
) -> None:
    from agent_runtime import ConfigError

    quoted = tmp_path / "runtime.toml"
    quoted.write_text('[retry]\nmax_retries = "5"\n')
    with pytest.raises(ConfigError, match=r"retry\.max_retries: .*without quotes"):
        ProviderConfiguration(quoted).preview(LOCAL)
    with pytest.raises(ConfigError, match=r"retry\.max_retries"):
        load_config(quoted, env={})
