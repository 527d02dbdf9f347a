"""A small Starlette app for the protocol routes' tests: a test middleware that attaches a
`Principal` per bearer token (the gateway's real authentication is not needed), and uvicorn
serving it on an ephemeral port of 127.0.0.1 in a thread."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Literal

import uvicorn
from starlette.applications import Starlette
from starlette.requests import HTTPConnection
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from agent_runtime import Runtime
from agent_runtime.config import RuntimeConfig
from agent_runtime.server._principal import Principal, attach
from agent_runtime.testing import wait_until

ADMIN = "admin-token"
"""A token whose principal may use every session."""

OTHER = "other-session-token"
"""A token whose principal may use session `s2` only."""

PRINCIPALS: Mapping[str, Principal] = {
    ADMIN: Principal("admin"),
    OTHER: Principal("other", frozenset({"s2"})),
}
"""The principals of `ADMIN` and `OTHER`, for `app_of`."""


class TokenPrincipals:
    """Attaches the principal of the request's bearer token, or none (the route answers 401)."""

    def __init__(self, app: ASGIApp, principals: Mapping[str, Principal]) -> None:
        self.app = app
        self.principals = principals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            connection = HTTPConnection(scope)
            header = connection.headers.get("authorization", "")
            principal = self.principals.get(header.removeprefix("Bearer "))
            if principal is not None:
                attach(connection, principal)
        await self.app(scope, receive, send)


def app_of(
    routes: Sequence[BaseRoute], principals: Mapping[str, Principal] | None = None
) -> Starlette:
    """`routes` behind `TokenPrincipals` (default: `ADMIN` may use every session)."""
    app = Starlette(routes=list(routes))
    app.add_middleware(TokenPrincipals, principals=principals or {ADMIN: Principal("admin")})
    return app


@contextmanager
def served(app: ASGIApp, *, lifespan: Literal["on", "off"] = "off") -> Iterator[str]:
    """`app` under uvicorn on 127.0.0.1 (an ephemeral port) until the block ends; yields its
    root URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan=lifespan)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="test-uvicorn", daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), timeout=30)
        assert server.started, "uvicorn did not start"
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


@contextmanager
def served_sharing_loop(
    config: RuntimeConfig,
    make_routes: Callable[[Runtime], Sequence[BaseRoute]],
    principals: Mapping[str, Principal] | None = None,
) -> Iterator[tuple[str, Runtime]]:
    """The routes of a runtime started by the app's lifespan with `Runtime.astart`, which
    shares the server's event loop (as a gateway embedding the runtime does); yields the root
    URL and the runtime."""
    started: list[Runtime] = []

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with Runtime.astart(config) as runtime:
            app.router.routes.extend(make_routes(runtime))
            started.append(runtime)
            yield

    app = Starlette(lifespan=lifespan)
    app.add_middleware(TokenPrincipals, principals=principals or {ADMIN: Principal("admin")})
    with served(app, lifespan="on") as root:
        yield root, started[0]
