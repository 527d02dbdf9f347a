"""Which model profiles a token may run through the LLM proxy (`/v1/llm/stream`): the
`profiles` of its `[server.tokens.NAME]` scope; left out, every profile for a token of every
session and none for a token scoped to sessions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_runtime import ConfigError
from agent_runtime.config import ServerTokenConfig, load_config
from agent_runtime.llm import ChatRequest, PermissionDeniedError, proxy
from agent_runtime.messages import UserMessage

from .harness import ADMIN, ALICE, Gateway, auth, gateway

BOB = "bob-token-0123456789ab"  # session "b", profile "quick"
CAROL = "carol-token-0123456789"  # every session, profile "echo"


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    tokens = {
        "admin": ServerTokenConfig(token=ADMIN),
        "alice": ServerTokenConfig(token=ALICE, sessions=("a",)),
        "bob": ServerTokenConfig(token=BOB, sessions=("b",), profiles=("quick",)),
        "carol": ServerTokenConfig(token=CAROL, profiles=("echo",)),
    }
    with gateway(("quick", "echo"), tokens=tokens) as served:
        yield served


def call(gw: Gateway, token: str, profile: str) -> httpx.Response:
    request = ChatRequest(messages=[UserMessage(content="hi")])
    body = json.dumps({"profile": profile, "request": request.model_dump(mode="json")})
    return httpx.post(
        f"{gw.url}/v1/llm/stream",
        content=body,
        headers={**auth(token), "content-type": "application/json"},
        timeout=30,
    )


@pytest.mark.parametrize(
    ("token", "profile", "allowed"),
    [
        (ADMIN, "quick", True),  # no sessions, no profiles: every profile
        (ADMIN, "echo", True),
        (ALICE, "quick", False),  # sessions, no profiles: none
        (ALICE, "echo", False),
        (BOB, "quick", True),  # sessions and profiles: those named
        (BOB, "echo", False),
        (CAROL, "echo", True),  # no sessions, profiles: those named
        (CAROL, "quick", False),
    ],
)
def test_a_token_runs_only_the_profiles_its_scope_names(
    gw: Gateway, token: str, profile: str, allowed: bool
) -> None:
    response = call(gw, token, profile)
    if allowed:
        assert response.status_code == 200, response.text
        assert "event: done" in response.text
        return
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["type"] == "PermissionDeniedError"
    assert f"may not use model profile {profile!r}" in error["message"]
    assert "profiles" in error["message"]


def test_the_proxy_client_gets_a_permission_error_for_a_profile_outside_its_scope(
    gw: Gateway,
) -> None:
    model = proxy(gw.url, auth_token=ALICE, profile="quick")
    with pytest.raises(PermissionDeniedError, match="may not use model profile 'quick'"):
        model.generate_sync(ChatRequest(messages=[UserMessage(content="hi")]), timeout=30)


def test_an_unknown_profile_outside_the_scope_is_403_not_404(gw: Gateway) -> None:
    # A token learns nothing of the profiles it may not use, not even whether they exist.
    assert call(gw, BOB, "no-such-profile").status_code == 403
    assert call(gw, ADMIN, "no-such-profile").status_code == 404


def test_a_token_naming_an_unconfigured_profile_is_a_config_error_naming_it(
    tmp_path: Path,
) -> None:
    file = tmp_path / "runtime.toml"
    file.write_text('[server.tokens.bob]\ntoken = "bob-token-0123456789ab"\nprofiles = ["nope"]\n')
    with pytest.raises(ConfigError) as raised:
        load_config(file, env={})
    message = str(raised.value)
    assert "server.tokens.bob.profiles" in message
    assert "'nope'" in message
    assert "names no configured profile" in message
