"""The gateway's rules on the A2A JSON-RPC endpoint, around a2a-sdk's dispatcher:

- the body is parsed here first (its depth was bounded by `_guard`): one that is not JSON
  is a JSON-RPC parse error (-32700), one that is not a JSON-RPC 2.0 request object an invalid
  request (-32600), each with a message of ours;
- the text parts of `params.message` together may hold at most `server.max_prompt_chars`
  characters (-32602, naming the setting), as a prompt of the JSON API or AG-UI;
- an error answer of the SDK never carries Python exception text: an internal error (-32603)
  says only that the server's log has the details, and a parameter that does not fit the
  A2A schema is named by its path (`params.message.parts.text`) without the parser's words.

The JSON-RPC errors are answered with HTTP 200, as a2a-sdk does, so A2A clients read them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.responses import JSONResponse, Response

from agent_runtime.server._limits import too_long

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

INTERNAL = "internal error (the server's log has the details)"
_FIELD = re.compile(r"Failed to parse (\w+) field")


def rpc_error(request_id: Any, code: int, message: str) -> JSONResponse:
    """A JSON-RPC 2.0 error answer (HTTP 200)."""
    error = {"code": code, "message": message}
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error})


def check_request(raw: bytes, max_prompt_chars: int) -> JSONResponse | None:
    """The error answer to a request body `raw` that breaks a rule of the module docstring,
    or None when the SDK may handle it."""
    try:
        body = json.loads(raw, parse_constant=_no_constant)
    except _NotJson as exc:
        return rpc_error(None, PARSE_ERROR, str(exc))
    except ValueError:  # not JSON, or not UTF-8/16/32 text
        return rpc_error(None, PARSE_ERROR, "the request body is not valid JSON (UTF-8 text)")
    if not isinstance(body, dict):
        return rpc_error(
            None,
            INVALID_REQUEST,
            "a JSON-RPC request must be one JSON object (batches are not supported)",
        )
    request_id = body.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int | None):
        message = "the request's id must be a string, an integer or null"
        return rpc_error(None, INVALID_REQUEST, message)
    if body.get("jsonrpc") != "2.0":
        return rpc_error(request_id, INVALID_REQUEST, 'the request\'s "jsonrpc" must be "2.0"')
    if not isinstance(body.get("method"), str) or not body["method"]:
        return rpc_error(request_id, INVALID_REQUEST, 'the request\'s "method" must be a string')
    params = body.get("params", {})
    if not isinstance(params, dict):
        return rpc_error(request_id, INVALID_PARAMS, 'the request\'s "params" must be an object')
    if _text_chars(params.get("message")) > max_prompt_chars:
        return rpc_error(request_id, INVALID_PARAMS, too_long(max_prompt_chars))
    return None


class _NotJson(ValueError):
    """A body Python's json module reads but JSON does not allow."""


def _no_constant(name: str) -> Any:
    raise _NotJson(f"the request body holds {name}, which JSON does not allow (use null)")


def _text_chars(message: Any) -> int:
    """How many characters the text parts of an A2A message hold."""
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        return 0
    return sum(
        len(part["text"])
        for part in message["parts"]
        if isinstance(part, dict) and isinstance(part.get("text"), str)
    )


def _parse_error(data: Any) -> str | None:
    """The `parseError` text an SDK error's data holds (directly, or in an `ErrorInfo`'s
    metadata), or None."""
    if isinstance(data, list):
        for item in data:
            found = _parse_error(item)
            if found is not None:
                return found
    elif isinstance(data, dict):
        found = data.get("parseError")
        if isinstance(found, str):
            return found
        return _parse_error(data.get("metadata"))
    return None


def without_internals(response: Response) -> Response:
    """`response`, its JSON-RPC error made free of exception text (see the module
    docstring); a success or a stream is returned as it is."""
    if not isinstance(response, JSONResponse):
        return response
    try:
        body = json.loads(bytes(response.body))
    except ValueError:
        return response
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return response
    parse_error = _parse_error(error.get("data"))
    if error.get("code") == INTERNAL_ERROR:
        message = INTERNAL
    elif isinstance(parse_error, str):
        fields = _FIELD.findall(parse_error)
        message = (
            f"params.{'.'.join(fields)} does not have the type the A2A schema gives it"
            if fields
            else "the request is not a valid JSON-RPC 2.0 request of this method"
        )
    else:
        return response
    answer = rpc_error(body.get("id"), int(error.get("code", INTERNAL_ERROR)), message)
    answer.status_code = response.status_code
    return answer
