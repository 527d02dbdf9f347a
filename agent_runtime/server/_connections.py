"""Slow and numerous clients under `agent-runtime serve`: uvicorn's HTTP/1.1 protocol (h11)
with a header timeout and a connection cap, which uvicorn itself lacks (it has no header
timeout, and checks `limit_concurrency` only once a request's headers are in).

Guarantees (`ConnectionGuard`, shared by every connection of one server):
- A connection whose request headers are not complete within `header_timeout` seconds of
  its opening (or of its previous response's end, for a kept-alive connection) is closed.
  A request whose headers are in is never cut by it (an SSE stream stays open as long as it
  runs).
- At most `max_connections` connections are open. A connection past the cap closes the
  connection that has waited longest for its headers (a half-sent request, an idle
  kept-alive one), so a client that sends a whole request gets in while slow ones crowd the
  server; when every open connection has a request in progress, the new one is answered 503
  and closed.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: 66\r\n\r\n"
    b"the server has as many connections open as it may (max_connections)"
)


class ConnectionGuard:
    """The header timeout and the connection cap of one server, and its counts (how many
    connections were closed for slow headers, closed to make room, refused)."""

    def __init__(self, header_timeout: float, max_connections: int) -> None:
        if header_timeout <= 0 or max_connections < 1:
            raise ValueError(
                "header_timeout must be positive and max_connections at least 1, not "
                f"{header_timeout!r} and {max_connections!r}"
            )
        self.header_timeout = header_timeout
        self.max_connections = max_connections
        self.waiting: OrderedDict[GuardedH11Protocol, None] = OrderedDict()
        self.timed_out = 0
        self.evicted = 0
        self.refused = 0

    def protocol(self) -> type[GuardedH11Protocol]:
        """The protocol class to give uvicorn (`uvicorn.Config(http=...)`), bound to this
        guard."""
        return type("GuardedH11Protocol", (GuardedH11Protocol,), {"guard": self})

    def make_room(self, newcomer: GuardedH11Protocol) -> bool:
        """Close the connection that waited longest for its headers; False if none waits."""
        for protocol in self.waiting:
            if protocol is not newcomer:
                self.stop_waiting(protocol)
                self.evicted += 1
                protocol.transport.close()
                return True
        return False

    def stop_waiting(self, protocol: GuardedH11Protocol) -> None:
        """`protocol` no longer waits for headers (they came, or it closed)."""
        self.waiting.pop(protocol, None)
        protocol.cancel_header_timer()


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol under a `ConnectionGuard` (see the module docstring); made per
    guard by `ConnectionGuard.protocol()`."""

    guard: ConnectionGuard
    _header_timer: asyncio.TimerHandle | None = None
    _awaited: Any = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        guard = self.guard
        if len(self.connections) > guard.max_connections and not guard.make_room(self):
            guard.refused += 1
            transport.write(_BUSY)
            transport.close()
            return
        self._await_headers()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._header_timer is not None and self.cycle is not self._awaited:
            self.guard.stop_waiting(self)  # a request's headers are complete

    def on_response_complete(self) -> None:
        before = self.cycle
        super().on_response_complete()
        if not self.transport.is_closing() and self.cycle is before:
            self._await_headers()  # (a pipelined request already in has its headers)

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.stop_waiting(self)
        super().connection_lost(exc)

    def cancel_header_timer(self) -> None:
        """Stop the header timer (the guard calls it)."""
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _await_headers(self) -> None:
        self.cancel_header_timer()
        self._awaited = self.cycle
        self.guard.waiting[self] = None
        self.guard.waiting.move_to_end(self)
        self._header_timer = self.loop.call_later(self.guard.header_timeout, self._too_slow)

    def _too_slow(self) -> None:
        self._header_timer = None
        if self in self.guard.waiting:
            self.guard.stop_waiting(self)
            self.guard.timed_out += 1
            self.transport.close()
