"""A stand-in for a protocol module (AG-UI, A2A, LLM proxy): `routes(runtime)` as they expose."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from agent_runtime.server._principal import principal_of, require_session


async def _whoami(request: Request) -> Response:
    principal = principal_of(request)
    require_session(request, request.path_params["session"])
    return JSONResponse({"principal": principal.name})


def routes(runtime: Any) -> list[BaseRoute]:
    return [Route("/v1/fake/{session}", _whoami, methods=["GET"])]
