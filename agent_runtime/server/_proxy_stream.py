"""An SSE response that stops producing the moment its client goes away."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterable, Mapping

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

SSE_HEADERS = {"cache-control": "no-store", "x-accel-buffering": "no"}
"""Headers of every event stream: never cached, never buffered by a reverse proxy."""


class DisconnectingStream(StreamingResponse):
    """`text/event-stream` from `content`, cancelled as soon as the client disconnects.

    Starlette's `StreamingResponse` notices a disconnect under ASGI 2.4 servers only when it
    next writes, so a stream waiting on a silent upstream (a model thinking, a hung provider)
    would hold that upstream open. This one always listens for `http.disconnect` beside the
    writer and cancels `content` (its `finally` blocks run) when it arrives. The request body
    must have been read before (a route reads it to validate it).
    """

    def __init__(
        self, content: AsyncIterable[str], *, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(
            content, media_type="text/event-stream", headers={**SSE_HEADERS, **(headers or {})}
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as group:

            async def write() -> None:
                # a connection that broke under a write is a disconnect too
                with contextlib.suppress(OSError):
                    await self.stream_response(send)
                group.cancel_scope.cancel()

            group.start_soon(write)
            await self.listen_for_disconnect(receive)
            group.cancel_scope.cancel()
