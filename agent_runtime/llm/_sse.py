"""SseEventSource: the server-sent events of one streamed answer, over a `Transport`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from types import TracebackType
from typing import Any

import httpx
import httpx_sse

from agent_runtime._text import replace_lone_surrogates_in
from agent_runtime.llm._deadlines import StreamDeadlines
from agent_runtime.llm._error_map import parse_body, request_id_of
from agent_runtime.llm._transport import Transport, called, encode_json
from agent_runtime.llm.errors import LLMError, NetworkError

DRAIN_SECONDS = 1.0
"""How long a finished answer is read on for the end of its body (so that its connection
goes back to the pool) before it is closed instead, dropping the connection."""
DRAIN_EVENTS = 64
"""How many events after the terminal marker are read, at most, for the end of the body."""

KeepAlive = Callable[[httpx_sse.ServerSentEvent], bool]
"""Tells a provider's keep-alive events (Anthropic's `ping`) from its data events."""


class SseEventSource:
    """The events of one streamed answer, read as `async with ... as stream: async for ...`.

    Guarantees:
    - iteration yields the events that carry data, in order; blanks, SSE comments and the
      provider's keep-alive events are skipped, and do not count as data for `idle_timeout`;
    - `request_timeout` bounds the whole answer, `idle_timeout` each wait for a data event:
      either raises a retryable `NetworkError` naming it (code `request_timeout` or
      `idle_timeout`), and the response is closed;
    - leaving the `async with` block normally (the answer is complete, e.g. at `[DONE]`)
      reads the rest of the body (up to `DRAIN_EVENTS` events within `DRAIN_SECONDS`) before
      closing it, so the connection is kept for the next call; leaving it by an error, a
      `break` of the consumer or cancellation closes the response at once;
    - `request_id` is the response's once its status line arrived; `request_bytes` the size
      of the request body sent (for a usage estimate when the provider reports none).

    Raises (while iterating):
        LLMError: an error status (mapped), or a transport failure, a timeout, or an answer
            that is not an event stream (`NetworkError`).
    """

    def __init__(
        self,
        transport: Transport,
        path: str,
        body: Mapping[str, Any],
        *,
        params: Mapping[str, str] | None = None,
        keepalive: KeepAlive | None = None,
    ) -> None:
        self.request_id: str | None = None
        self.request_bytes = 0
        self._transport = transport
        self._request = (path, body, params)
        self._keepalive = keepalive
        self._deadlines = StreamDeadlines(
            transport.provider, transport.request_timeout, transport.idle_timeout
        )
        self._stack: contextlib.AsyncExitStack | None = None
        self._events: AsyncGenerator[httpx_sse.ServerSentEvent, None] | None = None
        self._ended = False
        self._started: float | None = None  # when the request was sent (monotonic)

    async def __aenter__(self) -> SseEventSource:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._deadlines.stop()
        try:
            if exc_type is None:
                await self._drain()
        finally:
            await self._close()

    def __aiter__(self) -> SseEventSource:
        return self

    async def __anext__(self) -> httpx_sse.ServerSentEvent:
        deadlines = self._deadlines
        task = deadlines.waiting()
        try:
            events = self._events if self._events is not None else await self._open()
            keepalive = self._keepalive
            while True:
                event = await anext(events)
                if event.data.strip() and (keepalive is None or not keepalive(event)):
                    return event
        except StopAsyncIteration:
            self._ended = True
            raise
        except asyncio.CancelledError:
            expired = deadlines.expired(task)
            if expired is None:
                raise
            expired.request_id = self.request_id
            raise expired from None
        except httpx.HTTPError as exc:
            expired = deadlines.expired(task)  # a deadline's cancel seen as a broken read
            error = expired or self._transport.network_error(exc, started=self._started)
            error.request_id = self.request_id
            raise error from exc
        finally:
            deadlines.done_waiting()

    async def _open(self) -> AsyncGenerator[httpx_sse.ServerSentEvent, None]:
        transport = self._transport
        path, body, params = self._request
        headers = transport.request_headers()
        headers.setdefault("content-type", "application/json")
        headers.setdefault("accept", "text/event-stream")
        headers.setdefault("cache-control", "no-store")
        self._stack = stack = contextlib.AsyncExitStack()
        content = encode_json(body)
        self.request_bytes = len(content)
        self._started = time.monotonic()
        response = await stack.enter_async_context(
            transport.client().stream("POST", path, content=content, headers=headers, params=params)
        )
        transport.answered()
        if response.status_code >= 400:
            raw = await response.aread()
            raise transport.error_for(response.status_code, raw, response.headers, called(response))
        content_type = response.headers.get("content-type", "")
        if "text/event-stream" not in content_type:
            raw = await response.aread()
            parsed = parse_body(raw)
            if isinstance(parsed, list) and len(parsed) == 1:
                parsed = parsed[0]  # Gemini wraps error bodies in a list
            if isinstance(parsed, dict) and "error" in parsed:
                raise transport.stream_error(parsed)
            raise NetworkError(
                f"{transport.provider} answered a stream request with {content_type!r} "
                f"instead of text/event-stream: {raw[:200]!r}",
                provider=transport.provider,
                status=response.status_code,
            )
        self.request_id = request_id_of(response.headers)
        self._events = httpx_sse.EventSource(response).aiter_sse()
        return self._events

    async def _drain(self) -> None:
        """Read a finished answer on to the end of its body (bounded), so that closing the
        response returns its connection to the pool instead of dropping it."""
        events = self._events
        if events is None or self._ended:
            return
        with contextlib.suppress(StopAsyncIteration, TimeoutError, httpx.HTTPError):
            async with asyncio.timeout(DRAIN_SECONDS):
                for _ in range(DRAIN_EVENTS):
                    await anext(events)

    async def _close(self) -> None:
        events, self._events = self._events, None
        stack, self._stack = self._stack, None
        try:
            if events is not None:
                with contextlib.suppress(httpx.HTTPError):
                    await events.aclose()
        finally:
            if stack is not None:  # closes the response
                with contextlib.suppress(httpx.HTTPError):
                    await stack.aclose()

    def json(self, event: httpx_sse.ServerSentEvent) -> Any:
        """The event's data decoded as JSON; a lone surrogate escape in it (`"\\udcff"`)
        decodes to U+FFFD, so streamed deltas are valid text like the messages they build.

        Raises:
            LLMError: the event is named `error` and its data is not JSON (mapped from the text).
            NetworkError: any other event whose data is not JSON (a garbled stream).
        """
        data = event.data
        try:
            value = json.loads(data)
        except ValueError as exc:
            if event.event == "error":
                raise self.error(event.data) from None
            raise NetworkError(
                f"{self._transport.provider} sent a stream event that is not JSON: "
                f"{event.data[:200]!r}",
                provider=self._transport.provider,
                request_id=self.request_id,
            ) from exc
        if "\\ud" in data or "\\uD" in data:  # a surrogate escape: paired, or lone
            return replace_lone_surrogates_in(value)
        return value

    def error(self, body: Any) -> LLMError:
        """The mapped error for an error event of this stream, with its request id."""
        return self._transport.stream_error(body, self.request_id)
