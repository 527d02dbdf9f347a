"""The gateway mounted over a runtime started with `Runtime.astart` in the application's
lifespan, so the runtime's loop is the server's own (`share_loop`, the default): the API and
the streams work there too (no blocking call of the gateway runs on that loop)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from agent_runtime import Runtime
from agent_runtime.server import asgi_app

from .harness import auth, gateway_config, read_events, serving


class _Hubs:
    """What `serving` ends at teardown: the hub of the gateway mounted in the lifespan."""

    hub: Any = None

    @property
    def loop(self) -> Any:
        return None if self.hub is None else self.hub.loop

    async def close(self) -> None:
        if self.hub is not None:
            await self.hub.close()


@pytest.fixture
def url() -> Iterator[str]:
    hubs = _Hubs()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with Runtime.astart(gateway_config()) as runtime:
            gateway = asgi_app(runtime)
            hubs.hub = gateway.state.hub
            app.mount("/gateway", gateway)
            yield

    outer = Starlette(lifespan=lifespan)
    outer.state.hub = hubs
    with serving(outer) as served:
        yield served


def test_runs_and_streams_on_a_runtime_that_shares_the_servers_loop(url: str) -> None:
    with httpx.Client(base_url=f"{url}/gateway", headers=auth(), timeout=30) as client:
        assert client.post("/v1/agents/h/main/0", json={"model": "quick"}).status_code == 201
        run = client.post("/v1/agents/h/main/0/run", json={"text": "hi"})
        assert run.status_code == 200 and run.json()["text"] == "done"
        frames = read_events(
            client, "/v1/agents/h/main/0/events?last_event_id=0", lambda f: f.event == "agent_end"
        )
        assert frames[0].event == "agent_start"
        state = client.get("/v1/agents/h/main/0")
        assert state.status_code == 200 and state.json()["is_running"] is False
        assert client.delete("/v1/agents/h/main/0").json() == {"stopped": True}
