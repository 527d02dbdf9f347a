"""Who may call the gateway: bearer tokens scoped to sessions, and the login cookie.

Guarantees:
- Every HTTP request and websocket, on every path (`/` and `/openapi.json` included), is
  answered 401 unless it carries a valid token: `Authorization: Bearer <token>`, or the
  cookie `/login?token=...` set. Only `/login` itself is let through to check its token.
- The request's `Principal` is attached (`_principal.attach`) before any route runs, so every
  route mounted in the app (the protocol endpoints included) finds it with `principal_of`.
- Tokens are compared in constant time: SHA-256 digests, `hmac.compare_digest`, every token
  of the table compared on every request (no early exit telling which one nearly matched).
- A token never appears in a log line or an error body; a principal is logged by its name.
- Without tokens (`--insecure-no-auth`) only requests whose Host is 127.0.0.1, localhost or
  [::1] are served (403 otherwise), which a DNS-rebinding page cannot fake.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from starlette.requests import HTTPConnection, Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from agent_runtime.server._principal import Principal, attach

COOKIE = "agent_runtime_token"
LOGIN_PATH = "/login"
LOGIN_HINT = (
    "<!doctype html><title>agent-runtime: log in</title><p>This page needs a token: open "
    "<code>login?token=&lt;token&gt;</code> (a token of <code>[server.tokens]</code> or "
    "of <code>agent-runtime serve --token</code>).</p>"
)
UNAUTHORIZED = (
    "a valid bearer token is required: send 'Authorization: Bearer <token>', or log in "
    "with /login?token=<token>"
)


@dataclass(frozen=True, slots=True)
class _Entry:
    digest: bytes
    principal: Principal


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class TokenTable:
    """The tokens a gateway accepts, each with the principal it speaks for.

    `open_access` (only for `--insecure-no-auth`) makes every request the principal
    `anonymous` with every session.
    """

    def __init__(self, tokens: Iterable[tuple[str, Principal]], *, open_access: bool = False):
        self._entries = tuple(_Entry(_digest(token), principal) for token, principal in tokens)
        self.open_access = open_access

    def __len__(self) -> int:
        return len(self._entries)

    def resolve(self, token: str | None) -> Principal | None:
        """The principal of `token`, or None (checked against every entry, constant time)."""
        if self.open_access:
            return Principal("anonymous")
        if not token:
            return None
        wanted = _digest(token)
        found: Principal | None = None
        for entry in self._entries:
            if hmac.compare_digest(entry.digest, wanted) and found is None:
                found = entry.principal
        return found


def presented_token(connection: HTTPConnection) -> str | None:
    """The token a request presents: its bearer token if it sends an Authorization header
    (a wrong one is not made good by a cookie), else its login cookie."""
    header = connection.headers.get("authorization")
    if header is not None:
        scheme, _, value = header.partition(" ")
        return value.strip() if scheme.lower() == "bearer" else None
    return connection.cookies.get(COOKIE)


def _refusal(status: int, message: str) -> Response:
    return JSONResponse(
        {"error": message}, status_code=status, headers={"WWW-Authenticate": "Bearer"}
    )


class AuthMiddleware:
    """ASGI middleware: 401 without a valid token, else the principal attached (see the
    module docstring). `root_path` prefixes of a mounted app are taken into account."""

    def __init__(self, app: ASGIApp, tokens: TokenTable) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        connection = HTTPConnection(scope)
        if self.tokens.open_access and not _loopback_host(connection):
            # Without tokens only this machine may call: a page elsewhere that rebinds its DNS
            # name to 127.0.0.1 still sends its own name as Host.
            await _refusal(403, "without tokens the gateway answers only to 127.0.0.1")(
                scope, receive, send
            )
            return
        if _route_path(scope) == LOGIN_PATH and scope["type"] == "http":
            await self.app(scope, receive, send)
            return
        principal = self.tokens.resolve(presented_token(connection))
        if principal is None:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            refusal = _refusal(401, UNAUTHORIZED)
            if "text/html" in connection.headers.get("accept", ""):  # a person, at the page
                refusal = HTMLResponse(
                    LOGIN_HINT, status_code=401, headers={"WWW-Authenticate": "Bearer"}
                )
            await refusal(scope, receive, send)
            return
        attach(connection, principal)
        await self.app(scope, receive, send)


def _loopback_host(connection: HTTPConnection) -> bool:
    host = connection.headers.get("host", "")
    name = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]")[0] + "]"
    return name in ("127.0.0.1", "localhost", "[::1]")


def _route_path(scope: Scope) -> str:
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path or "/"


def login_endpoint(tokens: TokenTable) -> Callable[[Request], Awaitable[Response]]:
    """`GET /login?token=...`: a valid token sets the HttpOnly, SameSite=Strict login cookie
    and redirects to the observer page; anything else is 401."""

    async def login(request: Request) -> Response:
        token = request.query_params.get("token")
        response = RedirectResponse("./", status_code=303)
        if tokens.open_access:
            return response
        if token is None or tokens.resolve(token) is None:
            return _refusal(401, "the token given to /login is not valid")
        response.set_cookie(
            COOKIE,
            token,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=request.scope.get("root_path") or "/",
        )
        return response

    return login
