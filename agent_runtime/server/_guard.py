"""Input shape checks in front of every route (the JSON API, AG-UI, A2A, the LLM proxy), so
abuse is refused with a 400 before any work proportional to it:

- a `Last-Event-ID` header or `last_event_id` query parameter longer than 20 characters
  (the largest id is 20 digits) is 400, on every route; the query is read as the routes read
  it (names and values percent-decoded, every occurrence);
- a request body (already bounded by `max_body_bytes`, see `_limits`) is read whole here: a
  non-empty one whose `Content-Type` is not JSON (`application/json` or `*/*+json`) is 415,
  and one whose JSON nests arrays and objects deeper than `MAX_JSON_DEPTH` is 400. The depth
  is measured in linear time, at C speed, without parsing (so before any parser can recurse),
  on the text a JSON parser would read: a UTF-16 or UTF-32 body (which `json.loads` takes)
  is measured as that text, not as bytes whose quotes and brackets are other characters'.
  The routes then read the same bytes, once more, from this buffer.

Every body the gateway takes is JSON, so the rules hold on every route, including those whose
libraries (a2a-sdk, ag-ui) parse the body themselves.
"""

from __future__ import annotations

import json
import re
from array import array
from itertools import accumulate
from urllib.parse import parse_qsl

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_JSON_DEPTH = 64
"""How deep arrays and objects of a request body may nest."""

MAX_EVENT_ID_CHARS = 20
"""How long a `Last-Event-ID` may be (2**64 has 20 digits)."""

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = b"[]{}"
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _BRACKETS)
_STEPS = bytes.maketrans(_BRACKETS, b"\x01\xff\x01\xff")  # open +1, close -1 (signed)
_JSON_TYPES = ("application/json",)
_CHUNK = 65_536


def json_too_deep(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON `body` nests arrays and objects deeper than `limit` (brackets inside
    strings do not count; for a body that is not JSON the answer is only a bound)."""
    body = _as_utf8(body)
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    steps = array("b", _STRING.sub(b"", body).translate(None, _NOT_BRACKETS).translate(_STEPS))
    depth = 0
    for start in range(0, len(steps), _CHUNK):  # in chunks: a deep body stops at its start
        depths = list(accumulate(steps[start : start + _CHUNK], initial=depth))
        if max(depths) > limit:
            return True
        depth = depths[-1]
    return False


def _as_utf8(body: bytes) -> bytes:
    """`body` as the UTF-8 of the text `json.loads` would decode it to: JSON in UTF-16 or
    UTF-32 is read by `json.loads`, and its bytes hold quotes and brackets that are parts of
    other characters (U+0122 is `22 01` in UTF-16-LE), so measured as bytes a deep body could
    pass for a shallow one. A body that does not decode is returned as it is (no parser
    reads it)."""
    encoding = json.detect_encoding(body)
    if encoding in ("utf-8", "utf-8-sig"):
        return body
    try:
        return body.decode(encoding, "surrogatepass").encode("utf-8", "surrogatepass")
    except UnicodeError:
        return body


def is_json_type(content_type: str) -> bool:
    """Whether a `Content-Type` value names JSON (`application/json`, or a `+json` type)."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media in _JSON_TYPES or (media.startswith("application/") and media.endswith("+json"))


def event_id_refusal(scope: Scope) -> str | None:
    """Why the request's `Last-Event-ID` (header or query parameter) is refused, or None."""
    for name, value in scope["headers"]:
        if name == b"last-event-id" and len(value.strip()) > MAX_EVENT_ID_CHARS:
            return _too_long_id("the Last-Event-ID header")
    query: bytes = scope.get("query_string", b"")
    # As Starlette reads it (`request.query_params`): `last%5Fevent%5Fid=` names it too.
    for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if name == "last_event_id" and len(value.strip()) > MAX_EVENT_ID_CHARS:
            return _too_long_id("the last_event_id query parameter")
    return None


def _too_long_id(what: str) -> str:
    return (
        f"{what} is longer than {MAX_EVENT_ID_CHARS} characters: it must be the id of an "
        "event this stream sent (a non-negative integer)"
    )


def not_json(content_type: str) -> str:
    """The message of a 415 for a body sent as `content_type`."""
    sent = repr(content_type[:100]) if content_type else "no Content-Type"
    return f"the request body must be JSON, sent with Content-Type: application/json (not {sent})"


def too_deep() -> str:
    """The message of a 400 for a body nested too deep."""
    return (
        f"the request body's JSON nests arrays and objects deeper than {MAX_JSON_DEPTH} "
        "levels, more than the server accepts"
    )


class InputGuardMiddleware:
    """ASGI middleware applying the checks of the module docstring to every HTTP request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = event_id_refusal(scope)
        if refusal is not None:
            await JSONResponse({"error": refusal}, status_code=400)(scope, receive, send)
            return
        if scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away meanwhile
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        content_type = ""
        for name, value in scope["headers"]:
            if name == b"content-type":
                content_type = value.decode("latin-1")
        problem: tuple[int, str] | None = None
        if body.strip() and not is_json_type(content_type):
            problem = (415, not_json(content_type))
        elif json_too_deep(body):
            problem = (400, too_deep())
        if problem is not None:
            await JSONResponse({"error": problem[1]}, status_code=problem[0])(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
