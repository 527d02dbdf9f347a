"""The auth matrix: every route answers 401 without a valid token, a token scoped to other
sessions gets 403, the login cookie is HttpOnly and SameSite=Strict, tokens are compared in
constant time, and the protocol endpoints mounted beside the API get the same principal."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from agent_runtime import ConfigError, Runtime
from agent_runtime.server import _app, _auth, asgi_app
from agent_runtime.server._auth import TokenTable
from agent_runtime.server._principal import Principal

from .harness import ADMIN, ALICE, Gateway, auth, gateway, gateway_config, serving

FAKE = "tests.agent_runtime.server.fake_protocol"


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    saved = _app.PROTOCOLS
    _app.PROTOCOLS = (FAKE, "agent_runtime.server._no_such_protocol")
    try:
        with gateway() as served:
            served.start("a/main/0", model="quick")
            served.start("b/main/0", model="quick")
            yield served
    finally:
        _app.PROTOCOLS = saved


def _concrete(path: str, session: str) -> str:
    return path.replace("{session}", session).replace("{role}", "main").replace("{index}", "0")


def _routes(gw: Gateway) -> list[tuple[str, str]]:
    """(method, path template) of every route: the OpenAPI document's, the page, the
    document itself and the mounted protocol route."""
    with gw.client() as client:
        document = client.get("/openapi.json").json()
    found = [
        (method.upper(), path)
        for path, item in document["paths"].items()
        for method in item
        if method != "parameters"
    ]
    return [*found, ("GET", "/"), ("GET", "/openapi.json"), ("GET", "/v1/fake/{session}")]


def _call(client: httpx.Client, method: str, path: str, **kwargs: object) -> httpx.Response:
    # SSE routes: only the status line and headers are read.
    with client.stream(method, path, **kwargs) as response:  # type: ignore[arg-type]
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            response.read()
        return response


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token-0123456789"},
        {"Authorization": f"Basic {ADMIN}"},
        {"Authorization": "Bearer"},
        {"Cookie": f"{_auth.COOKIE}=wrong-token-0123456789"},
    ],
    ids=["none", "wrong", "basic-scheme", "empty", "bad-cookie"],
)
def test_every_route_answers_401_without_a_valid_token(
    gw: Gateway, headers: dict[str, str]
) -> None:
    with httpx.Client(base_url=gw.url, timeout=10) as client:
        for method, path in _routes(gw):
            reply = _call(client, method, _concrete(path, "a"), headers=headers, json={})
            assert reply.status_code == 401, (method, path)
            assert reply.headers["www-authenticate"] == "Bearer"
            assert "Bearer" in reply.json()["error"]
            for value in headers.values():  # the token presented is never echoed
                token = value.split("=")[-1].split()[-1]
                assert len(token) < 16 or token not in reply.text


def test_a_token_scoped_to_a_session_gets_403_on_every_route_of_another(gw: Gateway) -> None:
    with gw.client(ALICE) as client:
        for method, path in _routes(gw):
            if "{session}" not in path:
                continue
            reply = _call(client, method, _concrete(path, "b"), json={"text": "x"})
            assert reply.status_code == 403, (method, path)
            assert reply.json() == {"error": "this token may not use that session"}
            allowed = _call(client, "GET", _concrete("/v1/agents/{session}/{role}/{index}", "a"))
            assert allowed.status_code == 200
        assert client.get("/v1/fake/a").json() == {"principal": "alice"}  # mounted: same auth


def test_the_tree_shows_a_scoped_token_only_its_sessions(gw: Gateway) -> None:
    with gw.client(ALICE) as alice, gw.client(ADMIN) as admin:
        seen_by_alice = {a["key"][0] for a in alice.get("/v1/tree").json()["agents"]}
        seen_by_admin = {a["key"][0] for a in admin.get("/v1/tree").json()["agents"]}
    assert seen_by_alice == {"a"}
    assert {"a", "b"} <= seen_by_admin


def test_login_sets_an_httponly_samesite_strict_cookie_that_authenticates(gw: Gateway) -> None:
    with httpx.Client(base_url=gw.url, timeout=10) as client:
        refused = client.get("/login", params={"token": "wrong-token-0123456789"})
        assert refused.status_code == 401 and "set-cookie" not in refused.headers
        login = client.get("/login", params={"token": ALICE})
        assert login.status_code == 303 and login.headers["location"] == "./"
        cookie = login.headers["set-cookie"]
        assert re.search(r"(?i)\bhttponly\b", cookie) and re.search(r"(?i)samesite=strict", cookie)
        page = client.get("/")  # the client keeps the cookie, as a browser does
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert client.get("/v1/agents/a/main/0").status_code == 200
        assert client.get("/v1/agents/b/main/0").status_code == 403
        # An Authorization header is not made good by the cookie beside it.
        wrong = client.get("/", headers={"Authorization": "Bearer wrong-token-0123456789"})
        assert wrong.status_code == 401


def test_a_browser_without_the_cookie_is_told_how_to_log_in(gw: Gateway) -> None:
    with httpx.Client(base_url=gw.url, timeout=10) as client:
        reply = client.get("/", headers={"Accept": "text/html,application/xhtml+xml"})
    assert reply.status_code == 401 and "text/html" in reply.headers["content-type"]
    assert "login?token=" in reply.text


def test_the_mounted_protocol_routes_need_the_token_and_an_absent_module_is_skipped(
    gw: Gateway,
) -> None:
    with httpx.Client(base_url=gw.url, timeout=10) as anonymous:
        assert anonymous.get("/v1/fake/a").status_code == 401
    with gw.client(ADMIN) as client:
        assert client.get("/v1/fake/b").json() == {"principal": "admin"}


def test_tokens_are_compared_in_constant_time_against_every_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = TokenTable([(f"token-{i}-0123456789abcdef", Principal(f"p{i}")) for i in range(5)])
    calls: list[int] = []
    real = _auth.hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append(len(a))
        return real(a, b)

    monkeypatch.setattr(_auth.hmac, "compare_digest", counting)
    assert table.resolve("token-0-0123456789abcdef") == Principal("p0")  # the first: no exit
    assert table.resolve("nope") is None
    assert calls == [32] * 10  # every entry, both times, digests of one length


def test_the_app_refuses_to_be_made_without_a_token_unless_insecure_then_loopback_only() -> None:
    config = gateway_config(tokens={})
    with Runtime.start(config) as runtime:
        with pytest.raises(ConfigError, match="--insecure-no-auth"):
            asgi_app(runtime)
        app = asgi_app(runtime, insecure_no_auth=True)
        with serving(app) as url, httpx.Client(base_url=url) as client:
            assert client.get("/v1/tree").status_code == 200
            assert client.get("/v1/tree", headers={"Host": "localhost:80"}).status_code == 200
            # A page whose DNS name was rebound to 127.0.0.1 sends its own name as Host.
            rebound = client.get("/v1/tree", headers={"Host": "evil.example:8000"})
            assert rebound.status_code == 403


def test_a_token_from_the_environment_is_read_and_an_unset_one_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agent_runtime.config import ServerConfig, ServerTokenConfig

    settings = ServerConfig(tokens={"ops": ServerTokenConfig(token_env="GATEWAY_TEST_TOKEN")})
    with pytest.raises(ConfigError, match="GATEWAY_TEST_TOKEN, which is not set"):
        _app.tokens_of(settings, env={})
    pairs = _app.tokens_of(settings, env={"GATEWAY_TEST_TOKEN": "from-env-0123456789"})
    assert pairs == [("from-env-0123456789", Principal("ops"))]
    with pytest.raises(ConfigError, match="at least 16"):
        _app.tokens_of(ServerConfig(), ["short"])
    with pytest.raises(ConfigError, match="GATEWAY_TEST_TOKEN is 1 characters long") as caught:
        _app.tokens_of(settings, env={"GATEWAY_TEST_TOKEN": "a"})  # as short as --token's
    assert "'a'" not in str(caught.value)


def test_an_internal_failure_is_a_500_without_detail(
    gw: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> None:
        raise RuntimeError("secret-detail in /srv/app/module.py")

    monkeypatch.setattr(gw.runtime, "tree", broken)
    with gw.client() as client:
        reply = client.get("/v1/tree", headers=auth())
    assert reply.status_code == 500
    assert "secret-detail" not in reply.text and ".py" not in reply.text
    assert reply.json()["error"].startswith("internal error")


def test_the_installed_protocol_endpoints_are_mounted_behind_the_same_authentication() -> None:
    with gateway() as gw:
        mounted = [
            (method, route.path)
            for route in _app.protocol_routes(gw.runtime)
            for method in sorted(getattr(route, "methods", None) or {"GET"})
            if method != "HEAD"
        ]
        if not mounted:
            pytest.skip("no protocol module is installed (agent_runtime/server/_agui.py, ...)")
        served = {getattr(route, "path", None) for route in gw.app.routes}
        with httpx.Client(base_url=gw.url, timeout=10) as anonymous, gw.client(ALICE) as alice:
            for method, path in mounted:
                assert path in served, path
                url = _concrete(path.replace("{index:int}", "{index}"), "b")
                assert _call(anonymous, method, url, json={}).status_code == 401, path
                if "{session}" in path:  # a token of session a only: 403 for session b
                    assert _call(alice, method, url, json={}).status_code == 403, path
