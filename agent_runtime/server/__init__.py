"""The optional HTTP/SSE gateway (`pip install agent-runtime[server]`).

`asgi_app(runtime)` is the gateway as an ASGI app: a JSON API under `/v1` to start, prompt,
steer, follow up, abort, inspect and stop agents by key, SSE streams per agent and per session
with `Last-Event-ID` resume, `/openapi.json`, and the observer page at `/`. Every route needs
a bearer token from `[server.tokens]` (or the login cookie of `/login?token=...`).
`agent-runtime serve` serves it with uvicorn.
"""

from agent_runtime.server._app import PROTOCOLS, asgi_app
from agent_runtime.server._principal import Principal

__all__ = ["PROTOCOLS", "Principal", "asgi_app"]
