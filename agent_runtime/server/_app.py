"""`asgi_app(runtime)`: the gateway as one Starlette app, to serve or to mount.

Layers, outermost first: CORS (only with `server.cors_origins`), the cross-site refusal (403,
`_csrf`), authentication (401, the principal attached for every route), the body bound (413),
the input shape checks (`_guard`: 400 for too deep JSON or a too long `Last-Event-ID`, 415
for a body that is not JSON), then the routes: the observer page
at `/`, `/login`, `/openapi.json`, the protocol endpoints of the modules in `PROTOCOLS` that
are installed (each module's `routes(runtime)`), then the JSON API under `/v1`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from agent_runtime._errors import ConfigError
from agent_runtime.config import ServerConfig
from agent_runtime.server._api import AgentApi
from agent_runtime.server._auth import AuthMiddleware, TokenTable, login_endpoint
from agent_runtime.server._csrf import CrossSiteMiddleware
from agent_runtime.server._errors import HANDLERS
from agent_runtime.server._guard import InputGuardMiddleware
from agent_runtime.server._hub import EventHub
from agent_runtime.server._limits import BodyLimitMiddleware
from agent_runtime.server._openapi import openapi_document
from agent_runtime.server._principal import Principal
from supervisors._log import get_logger

log = get_logger(__name__)

PROTOCOLS = (
    "agent_runtime.server._agui",
    "agent_runtime.server._a2a",
    "agent_runtime.server._llm_proxy",
)
"""Modules whose `routes(runtime)` the app mounts when they are present (AG-UI, A2A, the
LLM proxy): each is optional, so the gateway works without any of them."""

PAGE = Path(__file__).with_name("observer.html")


def tokens_of(
    settings: ServerConfig,
    extra: Iterable[str] = (),
    env: dict[str, str] | None = None,
) -> list[tuple[str, Principal]]:
    """The `(token, principal)` pairs of `[server.tokens]` plus `extra` tokens (every
    session, named `cli-1`, `cli-2`, ...).

    Raises:
        ConfigError: a `token_env` names an unset or empty variable, or a token is shorter
            than 16 characters.
    """
    env = dict(os.environ) if env is None else env
    pairs: list[tuple[str, Principal]] = []
    for name, entry in settings.tokens.items():
        if entry.token is not None:
            token = entry.token.get_secret_value()
        else:
            assert entry.token_env is not None
            token = env.get(entry.token_env, "")
            if not token:
                raise ConfigError(
                    f"server.tokens.{name}.token_env names the environment variable "
                    f"{entry.token_env}, which is not set (or empty)"
                )
            if len(token) < 16:  # as an inline token and --token (the value is not shown)
                raise ConfigError(
                    f"server.tokens.{name}.token_env: the token in {entry.token_env} is "
                    f"{len(token)} characters long; a server token must be at least 16"
                )
        sessions = None if entry.sessions is None else frozenset(entry.sessions)
        profiles = None if entry.profiles is None else frozenset(entry.profiles)
        pairs.append((token, Principal(name, sessions, profiles)))
    for number, token in enumerate(extra, start=1):
        if len(token) < 16:
            raise ConfigError("a server token must be at least 16 characters long")
        pairs.append((token, Principal(f"cli-{number}")))
    return pairs


class _LazyHub:
    """Binds the hub to the loop of the first request when no lifespan ran (a gateway
    mounted inside another app, whose lifespan does not reach it)."""

    def __init__(self, app: ASGIApp, hub: EventHub) -> None:
        self.app = app
        self.hub = hub

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            self.hub.start()
        await self.app(scope, receive, send)


def protocol_routes(runtime: Any, modules: Sequence[str] | None = None) -> list[BaseRoute]:
    """The routes of every module of `modules` (default `PROTOCOLS`) that is installed, in
    that order; a module whose own dependency is missing is skipped with a warning."""
    routes: list[BaseRoute] = []
    for name in PROTOCOLS if modules is None else modules:
        if importlib.util.find_spec(name) is None:
            continue
        try:
            module = importlib.import_module(name)
        except ImportError as exc:  # its own optional dependency is missing
            log.warning("gateway.protocol.unavailable", module=name, error=str(exc))
            continue
        routes.extend(module.routes(runtime))
    return routes


def asgi_app(
    runtime: Any,
    *,
    settings: ServerConfig | None = None,
    tokens: Iterable[str] = (),
    insecure_no_auth: bool = False,
) -> Starlette:
    """The gateway over `runtime` as an ASGI app (serve it, or mount it in another app).

    `settings` default to the runtime's `[server]` config; `tokens` adds bearer tokens for
    every session (as `agent-runtime serve --token`). The runtime is the caller's: the app
    never starts or stops it. With no token at all the app refuses to be made unless
    `insecure_no_auth` (then every request is allowed: bind it to 127.0.0.1 only).

    Raises:
        ConfigError: no token and not `insecure_no_auth`, or a token of the config cannot
            be read (see `tokens_of`).
    """
    settings = settings if settings is not None else runtime.config.server
    pairs = tokens_of(settings, tokens)
    if not pairs and not insecure_no_auth:
        raise ConfigError(
            "the gateway has no token: configure [server.tokens], pass --token, or start "
            "it with --insecure-no-auth (which binds only to 127.0.0.1)"
        )
    table = TokenTable(pairs, open_access=insecure_no_auth and not pairs)
    hub = EventHub(runtime, settings.replay_buffer, settings.replay_max_bytes)
    api = AgentApi(runtime, settings, hub)

    async def page(request: Request) -> Response:
        return HTMLResponse(PAGE.read_text(encoding="utf-8"), headers={"Cache-Control": "no-store"})

    async def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document(runtime))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        hub.start()
        try:
            yield
        finally:
            await hub.close()

    routes: list[BaseRoute] = [
        Route("/", page, methods=["GET"]),
        Route("/login", login_endpoint(table), methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        *protocol_routes(runtime),
        *api.routes(),
    ]
    middleware = []
    if settings.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(settings.cors_origins),
                allow_methods=["GET", "POST", "DELETE"],
                allow_headers=["Authorization", "Content-Type", "Last-Event-ID"],
            )
        )
    middleware += [
        Middleware(CrossSiteMiddleware, allowed_origins=settings.cors_origins),
        Middleware(AuthMiddleware, tokens=table),
        Middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes),
        Middleware(InputGuardMiddleware),
        Middleware(_LazyHub, hub=hub),
    ]
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers=HANDLERS,
        lifespan=lifespan,
    )
    app.state.hub = hub
    app.state.gateway_settings = settings  # the limits the protocol routes enforce too
    app.state.runtime = runtime
    return app
