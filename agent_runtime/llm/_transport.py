"""The shared HTTP transport of the adapters: pooled httpx clients, SSE, and error mapping."""

from __future__ import annotations

import asyncio
import json
import threading
import weakref
from collections.abc import AsyncGenerator, Callable, Mapping
from types import TracebackType
from typing import Any

import httpx
import httpx_sse

from agent_runtime.llm._error_map import map_error, parse_body, request_id_of
from agent_runtime.llm.errors import LLMError, NetworkError

ApiKey = str | Callable[[], str] | None


def resolve_api_key(api_key: ApiKey) -> str | None:
    """The key to send now: a string as is, a callable called on every request."""
    return api_key() if callable(api_key) else api_key


class Transport:
    """HTTP for one adapter: one pooled `httpx.AsyncClient` per event loop, errors mapped once.

    A client is bound to the event loop it was created on, so the runtime's loop and the
    sync bridge each get their own; clients of a loop that is gone are dropped with it.
    `headers()` is called for every request, so rotated credentials are picked up by retries.
    """

    def __init__(
        self,
        *,
        base_url: str,
        provider: str,
        headers: Callable[[], Mapping[str, str]],
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.provider = provider
        self._headers = headers
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self._transport = transport
        self._lock = threading.Lock()
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )

    def client(self) -> httpx.AsyncClient:
        """The pooled client of the running event loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.get(loop)
            if client is None or client.is_closed:
                client = httpx.AsyncClient(
                    base_url=self.base_url,
                    timeout=self._timeout,
                    transport=self._transport,
                    limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
                )
                self._clients[loop] = client
            return client

    async def aclose(self) -> None:
        """Close the client of the running loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.pop(loop, None)
        if client is not None:
            await client.aclose()

    def _request_headers(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        headers = dict(self._headers())
        if extra:
            headers.update(extra)
        return headers

    async def post_json(
        self,
        path: str,
        body: Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> tuple[Any, str | None]:
        """POST JSON, return `(parsed JSON, request id)`.

        Raises:
            LLMError: an error status (mapped) or a transport failure (`NetworkError`).
        """
        try:
            response = await self.client().post(
                path, json=body, headers=self._request_headers(headers), params=params
            )
        except httpx.HTTPError as exc:
            raise self._network_error(exc) from exc
        return self._json_or_raise(response)

    async def get_json(
        self,
        path: str,
        *,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> tuple[Any, str | None]:
        """GET JSON, return `(parsed JSON, request id)`.

        Raises:
            LLMError: as for `post_json`.
        """
        try:
            response = await self.client().get(
                path, headers=self._request_headers(headers), params=params
            )
        except httpx.HTTPError as exc:
            raise self._network_error(exc) from exc
        return self._json_or_raise(response)

    def _json_or_raise(self, response: httpx.Response) -> tuple[Any, str | None]:
        if response.status_code >= 400:
            raise self.error_for(response.status_code, response.content, response.headers)
        try:
            return response.json(), request_id_of(response.headers)
        except ValueError as exc:
            raise NetworkError(
                f"{self.provider} answered HTTP {response.status_code} with a body that is not "
                f"JSON: {response.text[:200]!r}",
                provider=self.provider,
                status=response.status_code,
            ) from exc

    async def stream_sse(
        self,
        path: str,
        body: Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
        on_open: Callable[[str | None], None] | None = None,
    ) -> AsyncGenerator[httpx_sse.ServerSentEvent, None]:
        """POST JSON and yield the server-sent events of the response.

        The response is closed when the iteration ends, fails or is cancelled (a cancelled
        read of a silent server returns at once). `on_open(request_id)` is called once the
        status line arrived and was not an error.

        Raises:
            LLMError: an error status (mapped) or a transport failure (`NetworkError`).
        """
        request_headers = self._request_headers(headers)
        request_headers.setdefault("accept", "text/event-stream")
        try:
            async with httpx_sse.aconnect_sse(
                self.client(), "POST", path, json=body, headers=request_headers, params=params
            ) as source:
                response = source.response
                if response.status_code >= 400:
                    raw = await response.aread()
                    raise self.error_for(response.status_code, raw, response.headers)
                content_type = response.headers.get("content-type", "")
                if "text/event-stream" not in content_type:
                    raw = await response.aread()
                    body = parse_body(raw)
                    if isinstance(body, list) and len(body) == 1:
                        body = body[0]  # Gemini wraps error bodies in a list
                    if isinstance(body, dict) and "error" in body:
                        raise self.stream_error(body)
                    raise NetworkError(
                        f"{self.provider} answered a stream request with {content_type!r} "
                        f"instead of text/event-stream: {raw[:200]!r}",
                        provider=self.provider,
                        status=response.status_code,
                    )
                if on_open is not None:
                    on_open(request_id_of(response.headers))
                async for event in source.aiter_sse():
                    yield event
        except httpx.HTTPError as exc:
            raise self._network_error(exc) from exc

    def error_for(
        self, status: int | None, raw: bytes | str | None, headers: Mapping[str, str] | None
    ) -> LLMError:
        """The mapped error for an error status (or, with status None, an in-stream error)."""
        return map_error(status, parse_body(raw), provider=self.provider, headers=headers)

    def events(
        self, path: str, body: Mapping[str, Any], *, params: Mapping[str, str] | None = None
    ) -> SseEventSource:
        """The server-sent events of `POST path` as an `SseEventSource` (no I/O until iterated)."""
        return SseEventSource(self, path, body, params=params)

    def stream_error(self, body: Any, request_id: str | None = None) -> LLMError:
        """The mapped error for an error event (or error body) inside a 200 answer, carrying
        `request_id` (an in-stream error has no headers of its own to take it from)."""
        error = map_error(None, body, provider=self.provider)
        error.request_id = request_id
        return error

    def _network_error(self, exc: httpx.HTTPError) -> NetworkError:
        kind = type(exc).__name__
        return NetworkError(
            f"{kind} talking to {self.provider} at {self.base_url}: {exc or kind}",
            provider=self.provider,
        )


class SseEventSource:
    """The events of one streamed answer, read as `async with ... as stream: async for ...`.

    Guarantees: iteration yields the events that carry data, in order (keep-alive blanks are
    skipped); leaving the `async with` block, by the end, an error, a `break` or cancellation,
    closes the HTTP response. `request_id` is the response's once its status line arrived.

    Raises (while iterating): as `Transport.stream_sse`.
    """

    def __init__(
        self,
        transport: Transport,
        path: str,
        body: Mapping[str, Any],
        *,
        params: Mapping[str, str] | None = None,
    ) -> None:
        self.request_id: str | None = None
        self._transport = transport
        self._events = transport.stream_sse(path, body, params=params, on_open=self._opened)

    def _opened(self, request_id: str | None) -> None:
        self.request_id = request_id

    async def __aenter__(self) -> SseEventSource:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._events.aclose()

    def __aiter__(self) -> SseEventSource:
        return self

    async def __anext__(self) -> httpx_sse.ServerSentEvent:
        while True:
            event = await anext(self._events)  # StopAsyncIteration ends the stream
            if event.data.strip():
                return event

    def json(self, event: httpx_sse.ServerSentEvent) -> Any:
        """The event's data decoded as JSON.

        Raises:
            LLMError: the event is named `error` and its data is not JSON (mapped from the text).
            NetworkError: any other event whose data is not JSON (a garbled stream).
        """
        try:
            return json.loads(event.data)
        except ValueError as exc:
            if event.event == "error":
                raise self.error(event.data) from None
            raise NetworkError(
                f"{self._transport.provider} sent a stream event that is not JSON: "
                f"{event.data[:200]!r}",
                provider=self._transport.provider,
                request_id=self.request_id,
            ) from exc

    def error(self, body: Any) -> LLMError:
        """The mapped error for an error event of this stream, with its request id."""
        return self._transport.stream_error(body, self.request_id)
