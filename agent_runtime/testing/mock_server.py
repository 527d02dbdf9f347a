"""MockProviderServer: a real HTTP server on 127.0.0.1 that plays scripts in provider wire formats.

One server speaks the OpenAI (Chat Completions), Anthropic (Messages) and Gemini
(generateContent) formats, chosen by the request path, so adapters are tested over real
sockets, never by patching httpx. Each request takes the next queued entry: a `ScriptedTurn`
(rendered in the request's format, streamed or not as the request asked) or a `MockResponse`
(an exact status, body, headers or SSE events, optionally hanging or disconnecting mid-stream).
Answers carry the request-id header as each API names it (Anthropic's `request-id`, else
`x-request-id`), and a request the real API would refuse for its shape (Gemini: a
`thoughtSignature` that is not base64) gets that API's error in place of its script entry.
The official SDKs parse what it serves (tests/agent_runtime/llm/test_mock_wire_shapes.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, get_args
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel, ConfigDict, Field

from agent_runtime.llm.errors import ContextLengthExceededError
from agent_runtime.testing._llama_cpp import NOT_FOUND, rejection, without_usage_option
from agent_runtime.testing._sse import sse_frame
from agent_runtime.testing._wire import WIRE_FORMATS, WireFormat
from agent_runtime.testing._wire_anthropic import REQUEST_ID_HEADER as ANTHROPIC_REQUEST_ID
from agent_runtime.testing._wire_embeddings import MockEmbeddings, embedding_format
from agent_runtime.testing._wire_gemini import refusal as gemini_refusal
from agent_runtime.testing.scripted import ScriptedTurn

Dialect = Literal["openai", "llama_cpp"]
"""Whose server the OpenAI wire format imitates: OpenAI's, or llama-cpp-python's."""
DIALECTS: tuple[str, ...] = get_args(Dialect)

_REQUEST_ID_HEADERS = {"anthropic": ANTHROPIC_REQUEST_ID}
"""The response header naming the request id, where a format's API does not call it
`x-request-id` (OpenAI's name)."""

_Refusal = Callable[[Mapping[str, Any], ScriptedTurn | None], tuple[int, Any] | None]
_REFUSALS: dict[str, _Refusal] = {"gemini": gemini_refusal}
"""Per format: `(status, body)` of what its API answers instead of the script entry, for a
request it refuses (or a scripted turn it could never send), else None."""


class MockResponse(BaseModel):
    """One exact answer of the mock server.

    Either `turn` (rendered in the request's wire format) or explicit `status`, `body`
    (JSON-able or text) and `headers`, or `events`: raw SSE `data:` payloads (strings are sent
    as is; dicts as JSON; a tuple `(event_name, payload)` adds an `event:` line). Behaviour:
    `delay` before the status line (a client that leaves meanwhile is recorded in
    `disconnects`), `chunk_delay` between events, `hang_after` N events then
    go silent (until the client disconnects or the server stops), `disconnect_after` N events
    then drop the connection without a terminal marker. `raw`: byte pieces of an SSE body sent
    exactly as given, each flushed on its own (to split frames at arbitrary points).
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    turn: ScriptedTurn | None = None
    status: int = 200
    body: Any = None
    headers: dict[str, str] = Field(default_factory=dict)
    events: list[Any] | None = None
    raw: list[bytes] | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    hang_after: int | None = None
    disconnect_after: int | None = None


@dataclass
class RecordedRequest:
    """What the server received: method, path, query, headers (lower-case) and JSON body."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    json: Any
    format: str
    received_at: float = field(default_factory=time.monotonic)


class MockProviderServer:
    """A threaded HTTP server on 127.0.0.1 (random port) serving queued scripts.

    Use as a context manager. `url` is the server root; `base_url(format)` the base URL an
    adapter of that format expects. `requests` records everything received;
    `disconnects` records when a client closed a delayed or streaming response early
    (monotonic time), so tests can bound how fast an abort reached the wire.

    `dialect="llama_cpp"` makes its OpenAI format behave as llama-cpp-python's server does
    (see `agent_runtime.testing._llama_cpp`): requests it rejects get its HTTP 500s, streams
    carry no usage chunk, an error turn streamed is an empty 200 event stream, and unknown
    paths get its 404. `max_request_chars`: a request whose JSON body is longer is answered
    as a context overflow (in the request's format and dialect) without taking a script
    entry, as a server with a small context window would.
    """

    def __init__(
        self,
        script: list[ScriptedTurn | MockResponse | str] | None = None,
        *,
        model: str = "m",
        dialect: Dialect = "openai",
        max_request_chars: int | None = None,
    ) -> None:
        if dialect not in DIALECTS:
            expected = ", ".join(DIALECTS)
            raise ValueError(f"unknown dialect {dialect!r} (expected one of: {expected})")
        if max_request_chars is not None and max_request_chars < 1:
            raise ValueError(f"invalid max_request_chars {max_request_chars!r} (expected >= 1)")
        self.model = model
        self.dialect: Dialect = dialect
        self.max_request_chars = max_request_chars
        self._lock = threading.Lock()
        self._queue: deque[ScriptedTurn | MockResponse] = deque()
        self.requests: list[RecordedRequest] = []
        self.disconnects: list[float] = []
        self.models: list[str] = ["m", "m-large"]
        self.embeddings = MockEmbeddings()
        """The embedding endpoints' state (vector size, queued failures): see `MockEmbeddings`."""
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.enqueue(*(script or []))

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> MockProviderServer:
        """Bind 127.0.0.1 on a free port and serve on a daemon thread."""
        handler = _make_handler(self)
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release hanging responses and shut the server down."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> MockProviderServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`."""
        assert self._server is not None, "start the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def base_url(self, wire: str) -> str:
        """The base URL an adapter of format `wire` (`openai`, `anthropic`, `gemini`) expects."""
        return WIRE_FORMATS[wire].base_url(self.url)

    # -- script ---------------------------------------------------------------------------------

    def enqueue(self, *entries: ScriptedTurn | MockResponse | str) -> None:
        """Append answers; a str is a text-only turn."""
        with self._lock:
            for entry in entries:
                self._queue.append(ScriptedTurn(text=entry) if isinstance(entry, str) else entry)

    def _next(self) -> ScriptedTurn | MockResponse | None:
        with self._lock:
            return self._queue.popleft() if self._queue else None

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    async def disconnected(self, timeout: float = 5.0) -> float:
        """Wait, without blocking the running event loop, until a client has closed a response
        early; return when it did (monotonic time).

        Awaited on the loop that made the call, it shows that the call's own abort closed the
        connection, not the client's teardown once the loop has ended.

        Raises:
            TimeoutError: no client closed a response within `timeout` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if self.disconnects:
                    return self.disconnects[0]
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no client closed a response within {timeout}s")
            await asyncio.sleep(0.001)

    def _disconnected(self) -> None:
        with self._lock:
            self.disconnects.append(time.monotonic())

    @property
    def stopping(self) -> threading.Event:
        """Set when the server stops; hanging handlers watch it."""
        return self._stopping


def _make_handler(server: MockProviderServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        mock = server

    return Handler


class _Handler(BaseHTTPRequestHandler):
    mock: MockProviderServer
    protocol_version = "HTTP/1.0"
    _request_id_header = "x-request-id"

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        parts = urlsplit(self.path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        length = int(headers.get("content-length", "0") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        wire = next(
            (w for w in WIRE_FORMATS.values() if w.matches(method, parts.path, headers)), None
        )
        self._request_id_header = _REQUEST_ID_HEADERS.get(wire.name if wire else "", "x-request-id")
        embedding = None if wire else embedding_format(method, parts.path)
        self.mock._record(
            RecordedRequest(
                method,
                parts.path,
                parse_qs(parts.query),
                headers,
                body,
                wire.name if wire else embedding or "",
            )
        )
        if embedding is not None:
            self._send_json(*self.mock.embeddings.answer(embedding, parts.path, body))
            return
        llama = self.mock.dialect == "llama_cpp"
        if wire is None:
            missing = {"error": {"message": f"no route for {method} {parts.path}"}}
            self._send_json(404, NOT_FOUND if llama else missing)
            return
        if method == "GET":
            self._send_json(200, wire.render_models(self.mock.models))
            return
        request = body if isinstance(body, dict) else {}
        llama = llama and wire.name == "openai"
        if llama and self._rejected(request, wire.is_stream(parts.path, request)):
            return
        limit = self.mock.max_request_chars
        if limit is not None and len(raw) > limit:
            overflow = ContextLengthExceededError(
                f"This model's maximum context length is {limit // 4} tokens. However, you "
                f"requested {len(raw) // 4} tokens. Please reduce the length of the messages."
            )
            self._answer(wire, MockResponse(turn=ScriptedTurn(error=overflow)), parts.path, request)
            return
        entry = self.mock._next()
        if entry is None:
            self._send_json(500, {"error": {"message": "MockProviderServer script exhausted"}})
            return
        response = entry if isinstance(entry, MockResponse) else MockResponse(turn=entry)
        if response.delay and not self._silent(response.delay):
            return
        self._answer(wire, response, parts.path, request)

    def _rejected(self, body: dict[str, Any], streaming: bool) -> bool:
        """Answer as llama-cpp-python does a request it rejects; False when it takes it."""
        rejected = rejection(body)
        if rejected is None:
            return False
        error_body, before_stream = rejected
        if streaming and not before_stream:
            self._stream([], MockResponse(), None)
        else:
            self._send_json(500, error_body)
        return True

    def _answer(
        self, wire: WireFormat, response: MockResponse, path: str, body: dict[str, Any]
    ) -> None:
        refuse = _REFUSALS.get(wire.name)
        refused = refuse(body, response.turn) if refuse is not None else None
        if refused is not None:
            self._send_json(*refused)
            return
        streaming = wire.is_stream(path, body)
        turn = response.turn
        llama = self.mock.dialect == "llama_cpp" and wire.name == "openai"
        if llama and streaming and turn is not None and turn.error is not None:
            self._stream([], response, turn)  # its errors after the headers: an empty stream
            return
        if llama:
            body = without_usage_option(body)
        if turn is not None and turn.error is not None and not turn.text_chunks():
            status, error_body, headers = wire.render_error(turn.error)
            self._send_json(status, error_body, headers)
            return
        if response.raw is not None:
            self._stream(list(response.raw), response, turn)
            return
        if response.events is None and turn is None:
            self._send_json(response.status, response.body, response.headers)
            return
        if not streaming and response.events is None:
            assert turn is not None
            self._send_json(200, wire.render_json(turn, body, self.mock.model), response.headers)
            return
        if response.events is not None:
            frames = [sse_frame(event) for event in response.events]
        else:
            assert turn is not None
            frames = wire.render_events(turn, body, self.mock.model)
        self._stream(frames, response, turn)

    def _stream(
        self, frames: list[bytes], response: MockResponse, turn: ScriptedTurn | None
    ) -> None:
        self.send_response(response.status)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header(self._request_id_header, "req_mock")
        for key, value in response.headers.items():
            self.send_header(key, value)
        self.end_headers()
        chunk_delay = response.chunk_delay or (turn.chunk_delay if turn is not None else 0.0)
        for sent, frame in enumerate(frames):
            if response.hang_after is not None and sent >= response.hang_after:
                self._hang()
                return
            if response.disconnect_after is not None and sent >= response.disconnect_after:
                self._drop()
                return
            if sent and chunk_delay and not self._silent(chunk_delay):
                return
            if not self._write(frame):
                return
        if response.hang_after is not None:
            self._hang()

    def _write(self, data: bytes) -> bool:
        try:
            self.wfile.write(data)
            self.wfile.flush()
            return True
        except OSError:
            self.mock._disconnected()
            return False

    def _hang(self) -> None:
        """Go silent until the client closes the connection or the server stops."""
        self._silent(None)

    def _silent(self, seconds: float | None) -> bool:
        """Send nothing for `seconds` (None: for ever), watching the socket.

        Returns True when the time passed with the client still there; False when the server
        stops or the client closed the connection (recorded in `disconnects` at once).
        """
        sock = self.connection
        deadline = None if seconds is None else time.monotonic() + seconds
        while not self.mock.stopping.is_set():
            wait = 0.01 if deadline is None else min(0.01, deadline - time.monotonic())
            if wait <= 0:
                return True
            readable, _, _ = select.select([sock], [], [], wait)
            if readable:
                try:
                    gone = not sock.recv(1, socket.MSG_PEEK)
                except OSError:
                    gone = True
                if gone:
                    self.mock._disconnected()
                    return False
        return False

    def _drop(self) -> None:
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        payload = body if isinstance(body, bytes | str) else json.dumps(body)
        data = payload.encode() if isinstance(payload, str) else payload
        self.send_response(status)
        is_json = not isinstance(body, bytes | str)
        self.send_header("content-type", "application/json" if is_json else "text/plain")
        self.send_header("content-length", str(len(data)))
        self.send_header(self._request_id_header, "req_mock")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self._write(data)
