"""Requests an attacker sends, on every door of the gateway (JSON API, AG-UI, A2A, LLM proxy):
cross-site requests are refused (with and without tokens), abuse that used to reach a 500 is
a 400 naming the problem, and the one limit set holds on every protocol with errors that
carry no Python exception text."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent_runtime import Runtime
from agent_runtime._key import AgentKey
from agent_runtime.config import ServerConfig
from agent_runtime.server import asgi_app
from agent_runtime.server._guard import json_too_deep

from .harness import ADMIN, Gateway, auth, gateway, gateway_config, serving

EVIL = "http://evil.example"
DEEP = b"[" * 100_000 + b"]" * 100_000
LONG_ID = "9" * 4400


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    with gateway(max_prompt_chars=100, cors_origins=("http://app.example",)) as served:
        yield served


@pytest.fixture(scope="module")
def open_gw() -> Iterator[tuple[Runtime, str]]:
    """A gateway started as `--insecure-no-auth` does: no token at all."""
    with Runtime.start(gateway_config()) as runtime:
        app = asgi_app(runtime, settings=ServerConfig(), insecure_no_auth=True)
        with serving(app) as url:
            yield runtime, url


def _client(gw: Gateway, **headers: str) -> httpx.Client:
    return httpx.Client(base_url=gw.url, headers={**auth(), **headers}, timeout=30)


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


# --- 1. cross-site requests ------------------------------------------------------------------


def test_without_tokens_a_cross_site_page_cannot_start_an_agent(
    open_gw: tuple[Runtime, str],
) -> None:
    runtime, url = open_gw
    body = json.dumps({"model": "quick"})
    plain = {"Content-Type": "text/plain"}
    with httpx.Client(base_url=url, timeout=30) as client:
        forged = client.post("/v1/agents/x/main/0", content=body, headers={**plain, "Origin": EVIL})
        fetch_only = client.post(
            "/v1/agents/x/main/1", content=body, headers={**plain, "Sec-Fetch-Site": "cross-site"}
        )
        not_json = client.post("/v1/agents/x/main/2", content=body, headers=plain)
        own = client.post(
            "/v1/agents/x/main/3",
            content=body,
            headers={
                "Content-Type": "application/json",
                "Origin": url,
                "Sec-Fetch-Site": "same-origin",
            },
        )
        cli = client.post(
            "/v1/agents/x/main/4", json={"model": "quick"}
        )  # no Origin: not a browser
    assert forged.status_code == 403
    assert "Origin 'http://evil.example'" in forged.json()["error"]
    assert "server.cors_origins" in forged.json()["error"]
    assert fetch_only.status_code == 403
    assert "Sec-Fetch-Site: cross-site" in fetch_only.json()["error"]
    assert not_json.status_code == 415
    assert "Content-Type: application/json" in not_json.json()["error"]
    assert (own.status_code, cli.status_code) == (201, 201)
    for index in (0, 1, 2):
        assert runtime.registry.lookup(AgentKey("x", "main", index)) is None


def test_the_login_cookie_is_refused_on_a_post_from_another_port_of_the_same_host(
    gw: Gateway,
) -> None:
    gw.start("c/main/0", model="quick")
    other_port = f"http://127.0.0.1:{_port(gw.url) + 1}"
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        login = client.get("/login", params={"token": ADMIN})
        assert login.status_code == 303 and "agent_runtime_token" in client.cookies
        path = "/v1/agents/c/main/0/abort"
        from_port = client.post(path, json={}, headers={"Origin": other_port})
        same_site = client.post(path, json={}, headers={"Sec-Fetch-Site": "same-site"})
        null = client.post(path, json={}, headers={"Origin": "null"})
        own = client.post(
            path, json={}, headers={"Origin": gw.url, "Sec-Fetch-Site": "same-origin"}
        )
        listed = client.post(
            path, json={}, headers={"Origin": "http://app.example", "Sec-Fetch-Site": "cross-site"}
        )
        read = client.get("/v1/tree", headers={"Origin": EVIL, "Sec-Fetch-Site": "cross-site"})
    assert (from_port.status_code, same_site.status_code, null.status_code) == (403, 403, 403)
    assert (own.status_code, listed.status_code, read.status_code) == (200, 200, 200)


@pytest.mark.parametrize("route", ["/v1/agui/c/main/0", "/v1/a2a/c/main/0", "/v1/llm/stream"])
def test_the_protocol_routes_refuse_cross_site_posts_too(gw: Gateway, route: str) -> None:
    with gw.client() as client:
        reply = client.post(route, json={}, headers={"Origin": EVIL})
    assert reply.status_code == 403


# --- 2. abuse that reached a 500 -------------------------------------------------------------

POST_ROUTES = [
    "/v1/agents/d/main/0",
    "/v1/agents/d/main/0/prompt",
    "/v1/agents/d/main/0/steer",
    "/v1/agents/d/main/0/follow_up",
    "/v1/agents/d/main/0/abort",
    "/v1/agents/d/main/0/run",
    "/v1/agui/d/main/0",
    "/v1/a2a/d/main/0",
    "/v1/llm/stream",
]


@pytest.mark.timing
def test_json_nested_deeper_than_64_levels_is_a_400_on_every_post_route(gw: Gateway) -> None:
    gw.start("d/main/0", model="quick")
    deep_in_a_string = json.dumps({"text": "[" * 1000}).encode()
    with _client(gw, **{"Content-Type": "application/json"}) as client:
        for route in POST_ROUTES:
            started = time.monotonic()
            reply = client.post(route, content=DEEP)
            assert reply.status_code == 400, (route, reply.text)
            assert "deeper than 64 levels" in reply.json()["error"], route
            assert time.monotonic() - started < 5, route
            at_65 = client.post(route, content=b"[" * 65 + b"]" * 65)
            assert at_65.status_code == 400, route
            at_64 = client.post(route, content=b"[" * 64 + b"]" * 64)
            assert at_64.status_code not in (400, 500), (route, at_64.text)
        brackets_in_text = client.post("/v1/agents/d/main/0/steer", content=deep_in_a_string)
    assert brackets_in_text.status_code == 413  # a string is not nesting (and it is too long)


def _hidden_in_utf16(depth: int, encoding: str) -> bytes:
    """JSON `depth` levels deep, in `encoding`: "\u0122" is `22 01` in UTF-16-LE, a quote
    byte that is no quote, so read as bytes the brackets would seem to sit in a string."""
    text = '{"a":"\u0122","b":' + "[" * depth + "]" * depth + ',"c":"x"}'
    return text.encode(encoding)


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16", "utf-32"])
def test_json_nested_too_deep_in_utf16_or_utf32_is_a_400_too(gw: Gateway, encoding: str) -> None:
    # json.loads reads UTF-16 and UTF-32: measured as bytes, this body passed for shallow
    # and reached the parser's recursion (a 500 and a reset connection).
    if gw.runtime.registry.lookup(AgentKey("u", "main", 0)) is None:
        gw.start("u/main/0", model="quick")
    body = _hidden_in_utf16(50_000, encoding)
    assert json_too_deep(body)
    assert not json_too_deep(_hidden_in_utf16(63, encoding))
    with _client(gw, **{"Content-Type": "application/json", "A2A-Version": "1.0"}) as client:
        for route in (
            "/v1/agents/u/main/1",
            "/v1/agents/u/main/0/run",
            "/v1/agui/u/main/0",
            "/v1/a2a/u/main/0",
            "/v1/llm/stream",
        ):
            reply = client.post(route, content=body)
            assert reply.status_code == 400, (route, reply.text)
            assert "deeper than 64 levels" in reply.json()["error"], route


@pytest.mark.parametrize(
    "how",
    [
        {"headers": {"Last-Event-ID": LONG_ID}},
        {"params": {"last_event_id": LONG_ID}},
        {"headers": {"Last-Event-ID": "1" * 21}},
    ],
    ids=["header-4400-digits", "query-4400-digits", "header-21-chars"],
)
def test_a_last_event_id_longer_than_20_characters_is_a_400(
    gw: Gateway, how: dict[str, Any]
) -> None:
    with gw.client() as client:
        for path in ("/v1/sessions/e/events", "/v1/tree", "/v1/a2a/e/main/0"):
            reply = client.get(path, **how)
            assert reply.status_code == 400, path
            assert "longer than 20 characters" in reply.json()["error"]


@pytest.mark.parametrize(
    "query",
    [
        "last%5Fevent%5Fid=" + LONG_ID,  # the name percent-encoded, as Starlette decodes it
        "last_event_id=" + "%39" * 4400,  # the digits percent-encoded
        "last_event_id=1&last_event_id=" + LONG_ID,  # the last occurrence is the one read
    ],
    ids=["encoded-name", "encoded-digits", "repeated"],
)
def test_a_long_last_event_id_in_any_spelling_of_the_query_is_a_400(
    gw: Gateway, query: str
) -> None:
    with gw.client() as client:
        reply = client.get(f"/v1/sessions/e/events?{query}")
    assert reply.status_code == 400, reply.text
    assert "longer than 20 characters" in reply.json()["error"]


def test_a_last_event_id_of_20_digits_resumes(gw: Gateway) -> None:
    with (
        gw.client() as client,
        client.stream(
            "GET", "/v1/sessions/e20/events", headers={"Last-Event-ID": "1" * 20}
        ) as stream,
    ):
        assert stream.status_code == 200


# --- 3. one limit set on every door ----------------------------------------------------------


def _a2a(text: str, **extra: Any) -> dict[str, Any]:
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}
    return {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": message}}


def test_a2a_refuses_a_message_over_max_prompt_chars_before_the_agent_sees_it(
    gw: Gateway,
) -> None:
    gw.start("p/main/0", model="echo")
    headers = {**auth(), "A2A-Version": "1.0"}
    with gw.client() as client:
        long = client.post("/v1/a2a/p/main/0", json=_a2a("x" * 101), headers=headers)
        fits = client.post("/v1/a2a/p/main/0", json=_a2a("x" * 100), headers=headers)
    error = long.json()["error"]
    assert error["code"] == -32602
    assert "100 characters, server.max_prompt_chars" in error["message"]
    assert "result" in fits.json(), fits.text
    agent = gw.runtime.registry.lookup(AgentKey("p", "main", 0))
    prompts = [m for m in agent.state().messages if m.role == "user"]
    assert [m.text for m in prompts] == ["x" * 100]


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": "\xff\xfe"}',
        b"\xff\xfe\x00{",
        b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": 5}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", '
        b'"params": {"configuration": {"historyLength": "abc"}}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": 5}',
        b"[]",
    ],
    ids=["bad-utf8", "bad-encoding", "message-not-object", "not-int", "method-type", "batch"],
)
def test_a2a_errors_carry_no_python_exception_text(gw: Gateway, body: bytes) -> None:
    if gw.runtime.registry.lookup(AgentKey("q", "main", 0)) is None:
        gw.start("q/main/0", model="echo")
    with _client(gw, **{"Content-Type": "application/json", "A2A-Version": "1.0"}) as client:
        reply = client.post("/v1/a2a/q/main/0", content=body)
    assert reply.status_code == 200
    error = reply.json()["error"]
    assert error["code"] in (-32700, -32600, -32602)
    text = json.dumps(error)
    for internal in ("codec", "decode", "object is not", "invalid literal", "int()", "Traceback"):
        assert internal not in text, text
    assert error["message"]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_an_a2a_body_with_a_number_json_does_not_allow_is_a_parse_error_naming_it(
    gw: Gateway, constant: str
) -> None:
    if gw.runtime.registry.lookup(AgentKey("q", "main", 0)) is None:
        gw.start("q/main/0", model="echo")
    body = (
        '{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {'
        '"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}], '
        f'"metadata": {{"score": {constant}}}}}}}}}'
    )
    with _client(gw, **{"Content-Type": "application/json", "A2A-Version": "1.0"}) as client:
        reply = client.post("/v1/a2a/q/main/0", content=body)
        listed = client.post(
            "/v1/a2a/q/main/0",
            content='{"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}}',
        )
    error = reply.json()["error"]
    assert error["code"] == -32700 and constant.lstrip("-") in error["message"]
    assert "result" in listed.json(), listed.text  # nothing stored that cannot be listed


def _agui(*messages: dict[str, Any]) -> dict[str, Any]:
    return {
        "threadId": "t",
        "runId": "r",
        "state": {},
        "messages": list(messages),
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


def test_agui_counts_max_prompt_chars_over_the_runs_new_user_messages(gw: Gateway) -> None:
    gw.start("g/main/0", model="echo")
    history = [
        {"id": "u0", "role": "user", "content": "y" * 500},
        {"id": "a0", "role": "assistant", "content": "z" * 500},
    ]
    with gw.client() as client:
        too_long = client.post(
            "/v1/agui/g/main/0",
            json=_agui(
                {"id": "u1", "role": "user", "content": "x" * 60},
                {"id": "u2", "role": "user", "content": "x" * 41},
            ),
        )
        with client.stream(
            "POST",
            "/v1/agui/g/main/0",
            json=_agui(*history, {"id": "u1", "role": "user", "content": "x" * 100}),
        ) as fits:
            status = fits.status_code
            lines = list(fits.iter_lines())
    assert too_long.status_code == 413
    assert too_long.json()["error"]["code"] == "prompt_too_long"
    assert "server.max_prompt_chars" in too_long.json()["error"]["message"]
    assert status == 200 and any("RUN_FINISHED" in line for line in lines)


def test_max_body_bytes_holds_on_agui_and_a2a() -> None:
    with gateway(max_body_bytes=2048) as gw, gw.client() as client:
        for route in ("/v1/agui/b/main/0", "/v1/a2a/b/main/0"):
            reply = client.post(route, json={"pad": "x" * 3000})
            assert reply.status_code == 413
            assert "2048 bytes, server.max_body_bytes" in reply.json()["error"]


@pytest.mark.timing
def test_the_depth_measure_skips_strings_and_stops_at_the_first_level_too_deep() -> None:
    nested = {"a": 1}
    for _ in range(63):
        nested = {"a": nested}  # 64 levels
    assert not json_too_deep(json.dumps(nested).encode())
    assert json_too_deep(json.dumps([nested]).encode())
    assert json_too_deep(b"[" * 65)  # unclosed: a parser would recurse all the same
    escaped = json.dumps({"t": 'a\\"' + "[" * 100, "u": '"{' * 100}).encode()
    assert not json_too_deep(escaped)
    started = time.monotonic()
    assert json_too_deep(b"[" * 600_000 + b"]" * 600_000)
    assert time.monotonic() - started < 1
