"""Cross-site request refusal: a web page elsewhere cannot make a browser change anything here.

A browser sends a request of another site with the user's cookie (SameSite does not separate
the ports of one host), and with `--insecure-no-auth` it needs no credential at all. So every
request that may change state (any method but GET, HEAD and OPTIONS) is answered 403 when:

- its `Origin` header is present and is neither the server's own origin (the host and port
  of its `Host` header, see `is_own_origin`) nor one of `server.cors_origins`; or
- it carries no allowed `Origin` and its `Sec-Fetch-Site` is `cross-site` or `same-site`.

A request with neither header (curl, httpx, the SDKs: not a browser) passes; it proves
itself with its token. Read-only requests pass (a page elsewhere cannot read their answer
without CORS). The refusal happens before authentication and before the body is read.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing here, so a cross-site one is let through."""

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_of(origin: str) -> tuple[str, int, bool] | None:
    """(host, port, whether the port is its scheme's default) of an http(s) origin; None for
    anything else (`null`, a file: page, garbage)."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    default = _DEFAULT_PORTS[parts.scheme]
    port = default if port is None else port
    return parts.hostname.lower().strip("[]"), port, port == default


def _own(host_header: str) -> tuple[str, int | None]:
    """(host, port or None) of a `Host` header."""
    host = host_header.strip().lower()
    name, colon, port = host.rpartition(":")
    if not colon or name.endswith(":") or "]" in port or not port.isdigit():
        return host.strip("[]"), None  # no port (an IPv6 literal's colons are not one)
    return name.strip("[]"), int(port)


def is_own_origin(origin: str, host_header: str) -> bool:
    """Whether `origin` is the server's own: the host of `Host` and its port (a `Host`
    without a port matches the origin scheme's default port; the scheme is not compared,
    so a server behind a TLS-terminating proxy knows its https origin)."""
    parsed = _origin_of(origin)
    if parsed is None:
        return False
    host, port, default = parsed
    own_host, own_port = _own(host_header)
    return host == own_host and (port == own_port or (own_port is None and default))


def cross_site_refusal(
    method: str,
    headers: dict[str, str],
    allowed_origins: frozenset[str],
) -> str | None:
    """Why a request must be refused as cross-site, or None when it may go on (the rule of
    the module docstring). `headers` are the request's, by lower-case name."""
    if method.upper() in SAFE_METHODS:
        return None
    origin = headers.get("origin")
    if origin is not None:
        if origin.strip().rstrip("/") in allowed_origins:
            return None
        if not is_own_origin(origin, headers.get("host", "")):
            return (
                f"cross-site request refused: Origin {origin[:200]!r} is neither this server's "
                "origin nor listed in server.cors_origins"
            )
    fetch_site = headers.get("sec-fetch-site", "").strip().lower()
    if fetch_site in ("cross-site", "same-site"):
        return (
            f"cross-site request refused: the browser says it comes from another site "
            f"(Sec-Fetch-Site: {fetch_site}); list its origin in server.cors_origins to allow it"
        )
    return None


class CrossSiteMiddleware:
    """ASGI middleware answering 403 `{"error": ...}` to a cross-site state-changing request
    (see the module docstring); `allowed_origins` are `server.cors_origins`."""

    def __init__(self, app: ASGIApp, allowed_origins: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed = frozenset(origin.rstrip("/") for origin in allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in SAFE_METHODS:
            headers: dict[str, str] = {}
            for name, value in scope["headers"]:
                if name in (b"origin", b"sec-fetch-site", b"host"):
                    headers.setdefault(name.decode("latin-1"), value.decode("latin-1"))
            reason = cross_site_refusal(scope["method"], headers, self.allowed)
            if reason is not None:
                await JSONResponse({"error": reason}, status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)
