"""Every key of `[server]` changes what the gateway does (the counterpart, for the gateway, of
tests/agent_runtime/test_config_keys.py, which leaves `[server]` to this file)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from pydantic import ValidationError

from agent_runtime.config import ServerConfig, ServerTokenConfig, load_config
from agent_runtime.testing import wait_until

from .harness import ADMIN, ALICE, gateway, read_events

SHIPPED = Path(__file__).resolve().parents[3] / "config" / "runtime.toml"
F = TypeVar("F", bound=Callable[..., Any])
COVERED: dict[str, str] = {}


def covers(*keys: str) -> Callable[[F], F]:
    def mark(test: F) -> F:
        for key in keys:
            COVERED[key] = test.__name__
        return test

    return mark


def test_every_server_key_is_changed_by_a_test() -> None:
    assert set(COVERED) == set(ServerConfig.model_fields)


def test_the_shipped_file_holds_the_server_defaults_and_the_environment_overrides_them() -> None:
    assert load_config(SHIPPED, env={}).server == ServerConfig()
    env = {"AGENT_RUNTIME_SERVER__REPLAY_BUFFER": "7"}
    assert load_config(SHIPPED, env=env).server.replay_buffer == 7


@covers("tokens")
def test_tokens_each_with_their_sessions() -> None:
    with gateway() as gw, httpx.Client(base_url=gw.url, timeout=10) as client:
        cases = [(ADMIN, "b", 200), (ALICE, "a", 200), (ALICE, "b", 403), ("x" * 20, "a", 401)]
        for token, session, status in cases:
            headers = {"Authorization": f"Bearer {token}"}
            with client.stream("GET", f"/v1/sessions/{session}/events", headers=headers) as reply:
                assert reply.status_code == status, (token, session)


@covers("max_body_bytes")
def test_max_body_bytes_answers_413_for_a_larger_body_declared_or_streamed() -> None:
    with gateway(max_body_bytes=2048) as gw, gw.client() as client:
        gw.start("s/main/0", model="quick")
        fits = client.post("/v1/agents/s/main/0/follow_up", json={"text": "x" * 1500})
        declared = client.post("/v1/agents/s/main/0/follow_up", json={"text": "x" * 3000})

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it is read
            yield b'{"text": "'
            for _ in range(10):
                yield b"x" * 500
            yield b'"}'

        streamed = client.post("/v1/agents/s/main/0/follow_up", content=chunks())
    assert fits.status_code == 202
    for reply in (declared, streamed):
        assert reply.status_code == 413
        assert "2048 bytes" in reply.json()["error"]


@covers("max_prompt_chars")
def test_max_prompt_chars_answers_413_for_a_longer_prompt_steer_or_follow_up() -> None:
    with gateway(max_prompt_chars=10) as gw, gw.client() as client:
        gw.start("s/main/0", model="quick")
        for action in ("prompt", "steer", "follow_up", "run"):
            reply = client.post(f"/v1/agents/s/main/0/{action}", json={"text": "x" * 11})
            assert reply.status_code == 413, action
            assert "longer than the server accepts (10 characters" in reply.json()["error"]
        assert client.post("/v1/agents/s/main/0/run", json={"text": "x" * 10}).status_code == 200
        start = client.post(
            "/v1/agents/s/other/0", json={"model": "quick", "system_prompt": "y" * 11}
        )
    assert start.status_code == 413


@covers("replay_buffer")
def test_replay_buffer_is_how_many_events_a_resuming_client_can_have() -> None:
    with gateway(replay_buffer=3) as gw, gw.client() as client:
        gw.start("s/main/0", model="quick")
        client.post("/v1/agents/s/main/0/run", json={"text": "hi"})
        frames = read_events(
            client, "/v1/agents/s/main/0/events?last_event_id=0", lambda f: f.event == "agent_end"
        )
    assert frames[0].event == "events_dropped"
    assert len(frames) == 1 + 3


@covers("sse_keepalive")
def test_sse_keepalive_sends_comments_on_an_idle_stream() -> None:
    comments = 0
    with (
        gateway(sse_keepalive=0.05) as gw,
        gw.client() as client,
        client.stream("GET", "/v1/sessions/quiet/events") as response,
    ):
        for line in response.iter_lines():
            comments += line == ": keepalive"
            if comments == 2:
                break
    assert comments == 2


@covers("cors_origins")
def test_cors_is_off_by_default_and_on_for_the_configured_origins() -> None:
    preflight = {
        "Origin": "http://ui.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization",
    }
    with gateway() as gw, gw.client() as client:
        off_get = client.get("/v1/tree", headers={"Origin": "http://ui.example"})
        off_preflight = client.options("/v1/tree", headers=preflight)
    assert "access-control-allow-origin" not in off_get.headers
    assert "access-control-allow-origin" not in off_preflight.headers
    with gateway(cors_origins=("http://ui.example",)) as gw, gw.client() as client:
        on_get = client.get("/v1/tree", headers={"Origin": "http://ui.example"})
        on_preflight = client.options("/v1/tree", headers=preflight)
        other = client.get("/v1/tree", headers={"Origin": "http://evil.example"})
    assert on_get.headers["access-control-allow-origin"] == "http://ui.example"
    assert on_preflight.status_code == 200
    assert "access-control-allow-origin" not in other.headers


def test_a_token_needs_exactly_one_source_of_16_characters_or_more() -> None:
    for bad in ({}, {"token": "x" * 20, "token_env": "X"}, {"token": "short"}):
        with pytest.raises(ValidationError):
            ServerTokenConfig(**bad)


# `agent-runtime serve`'s connection guard: the probe-shaped test of test_slow_clients.py
# changes both keys (a half-sent request closed after header_timeout; past max_connections
# the slowest connection makes room).
from .test_slow_clients import (  # noqa: E402
    test_serve_answers_token_holders_under_half_sent_requests_and_closes_those as _guarded,
)

covers("header_timeout", "max_connections")(_guarded)


@covers("tools")
def test_tools_are_named_as_module_and_name_and_imported_by_serve() -> None:
    # Imported at start by `agent-runtime serve` (test_serve_cli.py gives agents such tools).
    assert ServerConfig(tools=("myapp.tools:add",)).tools == ("myapp.tools:add",)
    with pytest.raises(ValidationError, match="tool 'add' is not of the form"):
        ServerConfig(tools=("add",))


@covers("replay_max_bytes")
def test_replay_max_bytes_bounds_what_every_replay_buffer_holds_together() -> None:
    # test_replay_budget.py shows the bound over rounds of agents and what a resume gets.
    with gateway(("chatty",), replay_max_bytes=65_536) as gw, gw.client() as client:
        for n in range(3):
            gw.start(f"s{n}/main/0", model="chatty")
            assert client.post(f"/v1/agents/s{n}/main/0/run", json={"text": "go"}).is_success
            assert client.delete(f"/v1/agents/s{n}/main/0").is_success
        hub = gw.app.state.hub
        wait_until(lambda: all(f.agent is None for f in list(hub._feeds.values())), timeout=10)
        assert hub.budget.used <= 65_536
        assert hub.agent_buffer(("s0", "main", 0)) is None  # the oldest closed: released
    with pytest.raises(ValidationError, match="replay_max_bytes"):
        ServerConfig(replay_max_bytes=1024)
