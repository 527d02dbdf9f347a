"""Who a request speaks for: the contract between the gateway's authentication and its routes.

The authentication middleware resolves every request's bearer token (or login cookie) to a
`Principal` and stores it with `attach`; a route that touches a session calls
`require_session(request, session)` before it reads or changes anything of that session.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.exceptions import HTTPException
from starlette.requests import HTTPConnection

_SCOPE_KEY = "agent_runtime.principal"


@dataclass(frozen=True, slots=True)
class Principal:
    """The holder of one token: `name` for logs (never the token), the sessions it may use
    (`None`: every session) and the model profiles it may run through the LLM proxy
    (`None`: the default, every profile for a principal of every session and none for one
    scoped to sessions)."""

    name: str
    sessions: frozenset[str] | None = None
    profiles: frozenset[str] | None = None

    def allows(self, session: str) -> bool:
        """True when this principal may read and steer `session`."""
        return self.sessions is None or session in self.sessions

    def allows_profile(self, profile: str) -> bool:
        """True when this principal may run model profile (or pool) `profile` through the
        LLM proxy (see the class docstring for the default)."""
        if self.profiles is None:
            return self.sessions is None
        return profile in self.profiles


def attach(connection: HTTPConnection, principal: Principal) -> None:
    """Record `principal` as the one `connection` (a request or websocket) speaks for."""
    connection.scope[_SCOPE_KEY] = principal


def principal_of(connection: HTTPConnection) -> Principal:
    """The principal the authentication middleware attached.

    Raises:
        HTTPException: 401 when none was attached (a route mounted without the middleware
            refuses rather than serving anonymously).
    """
    principal = connection.scope.get(_SCOPE_KEY)
    if not isinstance(principal, Principal):
        raise HTTPException(status_code=401, detail="authentication required")
    return principal


def require_session(connection: HTTPConnection, session: str) -> Principal:
    """The request's principal, if it may use `session`.

    Raises:
        HTTPException: 401 without a principal; 403 when its token is not scoped to `session`.
    """
    principal = principal_of(connection)
    if not principal.allows(session):
        raise HTTPException(status_code=403, detail="this token may not use that session")
    return principal
