"""`asgi_app(runtime)` mounted inside an application's own Starlette app, under a prefix: the
same auth, the login cookie scoped to the prefix, and live streams without the gateway's
lifespan ever running (the application's lifespan does not reach a mounted app)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from agent_runtime import Runtime
from agent_runtime.server import asgi_app

from .harness import ADMIN, auth, gateway_config, read_events, serving


@pytest.fixture
def mounted() -> Iterator[tuple[Runtime, str]]:
    with Runtime.start(gateway_config()) as runtime:
        gateway = asgi_app(runtime)

        async def home(request: object) -> PlainTextResponse:
            return PlainTextResponse("the application's own page")

        outer = Starlette(routes=[Route("/", home), Mount("/gateway", app=gateway)])
        outer.state.hub = gateway.state.hub  # what `serving` ends at teardown
        with serving(outer) as url:
            yield runtime, url


def test_a_mounted_gateway_keeps_its_auth_and_the_app_keeps_its_routes(
    mounted: tuple[Runtime, str],
) -> None:
    _, url = mounted
    with httpx.Client(base_url=url, timeout=10) as client:
        assert client.get("/").text == "the application's own page"
        assert client.get("/gateway/v1/tree").status_code == 401
        assert client.get("/gateway/v1/tree", headers=auth()).status_code == 200
        login = client.get("/gateway/login", params={"token": ADMIN})
        assert login.status_code == 303
        assert re.search(r"(?i)path=/gateway\b", login.headers["set-cookie"])
        page = client.get("/gateway/")
        assert page.status_code == 200 and "agent-runtime observer" in page.text


def test_a_mounted_gateway_streams_events_without_its_lifespan(
    mounted: tuple[Runtime, str],
) -> None:
    _, url = mounted
    with httpx.Client(base_url=f"{url}/gateway", headers=auth(), timeout=30) as client:
        started = client.post("/v1/agents/m/main/0", json={"model": "quick"})
        assert started.status_code == 201, started.text
        assert client.post("/v1/agents/m/main/0/run", json={"text": "hi"}).status_code == 200
        frames = read_events(
            client, "/v1/agents/m/main/0/events?last_event_id=0", lambda f: f.event == "agent_end"
        )
    assert frames[0].event == "agent_start" and frames[-1].data["agent"] == ["m", "main", 0]
