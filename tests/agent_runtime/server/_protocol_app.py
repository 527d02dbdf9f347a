"""A small Starlette app for the protocol routes' tests: a test middleware that attaches a
`Principal` per bearer token (the gateway's real authentication is not needed), and uvicorn
serving it on an ephemeral port of 127.0.0.1 in a thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import uvicorn
from starlette.applications import Starlette
from starlette.requests import HTTPConnection
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from agent_runtime.server._principal import Principal, attach
from agent_runtime.testing import wait_until

ADMIN = "admin-token"
"""A token whose principal may use every session."""


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
def served(app: ASGIApp) -> Iterator[str]:
    """`app` under uvicorn on 127.0.0.1 (an ephemeral port) until the block ends; yields its
    root URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
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
