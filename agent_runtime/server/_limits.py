"""The request body bound: a body over `max_bytes` is answered 413, read or not.

A `Content-Length` over the bound is refused before the route runs; a body without one (chunked)
is counted as it is read, and the route's read fails at the bound, which becomes the same 413
as long as the response has not started. Nothing past the bound is ever held in memory.
"""

from __future__ import annotations

from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_runtime.config import ServerConfig


class BodyTooLarge(Exception):
    """A request body went past the bound while a route read it."""


def too_large(limit: int) -> str:
    """The message of a 413 for a body over `limit` bytes."""
    return (
        f"the request body is larger than the server accepts ({limit} bytes, server.max_body_bytes)"
    )


def too_long(limit: int) -> str:
    """The message of a 413 for a prompt (or steering, follow-up, system prompt text) over
    `limit` characters."""
    return (
        "the prompt or message text is longer than the server accepts "
        f"({limit} characters, server.max_prompt_chars)"
    )


def limits_of(connection: HTTPConnection, default: ServerConfig) -> ServerConfig:
    """The `[server]` settings (the limits) of the gateway app serving `connection`: those
    `asgi_app` was made with, or `default` for a route mounted in another app."""
    app = connection.scope.get("app")
    settings = getattr(getattr(app, "state", None), "gateway_settings", None)
    return settings if isinstance(settings, ServerConfig) else default


class BodyLimitMiddleware:
    """ASGI middleware enforcing `max_bytes` on every HTTP request body."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = JSONResponse({"error": too_large(self.max_bytes)}, status_code=413)
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.max_bytes:
                    await refusal(scope, receive, send)
                    return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge:
            if started:
                raise
            await refusal(scope, receive, send)
