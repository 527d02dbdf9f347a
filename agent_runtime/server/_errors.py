"""How the gateway answers a failure: `{"error": "<what is wrong>"}`, never a traceback.

`ApiError` is what routes raise; Starlette's `HTTPException` (from `require_session` and the
router: 404, 405) is answered the same way; anything else is logged with its traceback on the
server and answered 500 `internal error`, with no detail (no path, no secret, no type name).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from supervisors._log import get_logger

log = get_logger(__name__)


class ApiError(Exception):
    """An error answer: `status` and a message naming the problem (and, for a body that
    does not validate, each problem's location and message)."""

    def __init__(
        self, status: int, message: str, details: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.details = details

    @classmethod
    def invalid(cls, exc: ValidationError) -> ApiError:
        """422 for a body that does not validate: where and what, not the values sent."""
        details = [
            {"loc": [p if isinstance(p, int) else str(p) for p in e["loc"]], "msg": e["msg"]}
            for e in exc.errors(include_url=False, include_input=False, include_context=False)
        ]
        where = ", ".join(".".join(str(p) for p in d["loc"]) or "body" for d in details)
        return cls(422, f"the request body is invalid ({where})", details)


def _body(
    status: int,
    message: str,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    content: dict[str, Any] = {"error": message}
    if details is not None:
        content["details"] = details
    return JSONResponse(content, status_code=status, headers=headers)


async def api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return _body(exc.status, exc.message, exc.details)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers) if exc.headers else None
    if exc.status_code == 404 and exc.detail == "Not Found":
        return _body(404, f"no route {request.url.path}", headers=headers)
    if exc.status_code == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
        return _body(405, message, headers=headers)
    return _body(exc.status_code, str(exc.detail), headers=headers)


async def internal_error(request: Request, exc: Exception) -> Response:
    log.error("gateway.request.failed", path=request.url.path, exc_info=exc)
    return _body(500, "internal error (the server's log has the details)")


HANDLERS = {ApiError: api_error, HTTPException: http_error, Exception: internal_error}
