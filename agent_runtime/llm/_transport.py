"""The shared HTTP transport of the adapters: pooled httpx clients, JSON calls, error mapping.

Streamed answers are read by `agent_runtime.llm._sse.SseEventSource` over a `Transport`.
Besides httpx's per-read `timeout`, every call is bounded by `request_timeout` (and a
stream's waits for data by `idle_timeout`, see `_deadlines`). Request bodies are encoded
here: text holding a lone surrogate is sent with U+FFFD in its place rather than failing with
an untyped `UnicodeEncodeError`.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from agent_runtime._text import replace_lone_surrogates
from agent_runtime.llm._deadlines import timeout_error
from agent_runtime.llm._error_map import map_error, parse_body, request_id_of
from agent_runtime.llm.errors import AuthenticationError, LLMError, NetworkError

ApiKey = str | Callable[[], str] | None


def resolve_api_key(api_key: ApiKey) -> str | None:
    """The key to send now: a string as is, a callable called on every request."""
    return api_key() if callable(api_key) else api_key


def api_key_now(
    api_key: ApiKey, key_envs: Sequence[str], provider: str, hint: str = ""
) -> str | None:
    """The key for the next request: `api_key` (a callable is called now), else the first of
    `key_envs` that is set, read now; None when there are no key variables (a keyless server).

    Raises:
        AuthenticationError: the key given resolved to an empty value, or no key variable is
            set (the message names them, then `api_key=` and `hint`).
    """
    if api_key is not None:
        key = resolve_api_key(api_key)
        if not key:
            raise AuthenticationError(
                f"no API key for {provider}: the api_key given resolved to an empty value",
                provider=provider,
            )
        return key
    if not key_envs:
        return None
    key = next((os.environ[n] for n in key_envs if os.environ.get(n)), None)
    if not key:
        raise AuthenticationError(
            f"no API key for {provider}: set {' or '.join(key_envs)} or pass api_key={hint}",
            provider=provider,
        )
    return key


def encode_json(body: Any) -> bytes:
    """`body` as compact UTF-8 JSON (as httpx sends `json=`); a lone surrogate in any string
    is sent as U+FFFD."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return replace_lone_surrogates(text).encode("utf-8")


def called(response: httpx.Response) -> str:
    """`METHOD scheme://host[:port]/path` of the response's request: no query string and no
    user info, so a credential carried in either never reaches an error message."""
    request = response.request
    url = request.url
    port = f":{url.port}" if url.port is not None else ""
    return f"{request.method} {url.scheme}://{url.host}{port}{url.path}"


class Transport:
    """HTTP for one adapter: one pooled `httpx.AsyncClient` per event loop, errors mapped once.

    A client is bound to the event loop it was created on, so the runtime's loop and the
    sync bridge each get their own; clients of a loop that is gone are dropped with it.
    `headers()` is called for every request, so rotated credentials are picked up by retries.
    Connections are kept alive between calls: a streamed answer is read to the end of its body
    before its response is closed. `request_timeout` bounds every call, `idle_timeout` the
    wait for each data event of a stream (None: no bound).

    Failures to reach the server (`network_error`): a connection refused before this
    transport ever had an answer from its server is final (`NetworkError`, not retryable,
    naming the URL: nothing listens at `base_url`, and retrying cannot change that); once the
    server has answered, a refusal is retryable (a server restarting). A timeout's error
    says how long the attempt took. Messages show `base_url` without its user info.

    Raises:
        ValueError: (at construction) `base_url` is not an http(s) URL with a host, or
            `timeout` / `connect_timeout` is not seconds > 0.
    """

    def __init__(
        self,
        *,
        base_url: str,
        provider: str,
        headers: Callable[[], Mapping[str, str]],
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        request_timeout: float | None = 600.0,
        idle_timeout: float | None = 120.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        check_base_url(base_url)
        for name, seconds in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
                raise ValueError(f"invalid {name} {seconds!r} (expected seconds > 0)")
        self.base_url = base_url.rstrip("/")
        self.shown_url = shown_url(self.base_url)  # for messages: no user info, no password
        self.provider = provider
        self.request_timeout = request_timeout
        self.idle_timeout = idle_timeout
        self._headers = headers
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self._transport = transport
        self._reached = False  # whether the server ever answered (a status line)
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
                client = self._clients[loop] = self._new_client()
            return client

    def _new_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base_url,
            timeout=self._timeout,
            transport=self._transport,
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
        )

    async def aclose(self) -> None:
        """Close the client of the running loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.pop(loop, None)
        if client is not None:
            await client.aclose()

    def request_headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The headers of a request now (the adapter's, resolved now, then `extra`)."""
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
        fresh_connection: bool = False,
    ) -> tuple[Any, str | None]:
        """POST JSON, return `(parsed JSON, request id)`; with `fresh_connection`, over a new
        connection rather than a pooled one (the server may be closing the one it used last).

        Raises:
            LLMError: an error status (mapped) or a transport failure or `request_timeout`
                (`NetworkError`).
        """
        request_headers = self.request_headers(headers)
        request_headers.setdefault("content-type", "application/json")
        content = encode_json(body)
        if fresh_connection and self._transport is None:
            client = self._new_client()
            try:
                response = await self._send(
                    "POST",
                    path,
                    content=content,
                    headers=request_headers,
                    params=params,
                    client=client,
                )
            finally:
                await client.aclose()
        else:
            response = await self._send(
                "POST", path, content=content, headers=request_headers, params=params
            )
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
        response = await self._send(
            "GET", path, headers=self.request_headers(headers), params=params
        )
        return self._json_or_raise(response)

    async def _send(
        self, method: str, path: str, client: httpx.AsyncClient | None = None, **options: Any
    ) -> httpx.Response:
        deadline = asyncio.timeout(self.request_timeout)
        started = time.monotonic()
        try:
            async with deadline:
                response = await (client or self.client()).request(method, path, **options)
        except TimeoutError:
            if not deadline.expired():
                raise
            seconds = self.request_timeout or 0.0
            raise timeout_error("request_timeout", self.provider, seconds) from None
        except httpx.HTTPError as exc:
            raise self.network_error(exc, started=started) from exc
        self.answered()
        return response

    def answered(self) -> None:
        """Note that the server answered (a status line came): later refusals are retryable."""
        self._reached = True

    def _json_or_raise(self, response: httpx.Response) -> tuple[Any, str | None]:
        if response.status_code >= 400:
            raise self.error_for(
                response.status_code, response.content, response.headers, called(response)
            )
        try:
            return response.json(), request_id_of(response.headers)
        except ValueError as exc:
            raise NetworkError(
                f"{self.provider} answered HTTP {response.status_code} with a body that is not "
                f"JSON: {response.text[:200]!r}",
                provider=self.provider,
                status=response.status_code,
            ) from exc

    def error_for(
        self,
        status: int | None,
        raw: bytes | str | None,
        headers: Mapping[str, str] | None,
        url: str | None = None,
    ) -> LLMError:
        """The mapped error for an error status (or, with status None, an in-stream error);
        `url` is the request called (`called(response)`), named by a 404's message."""
        return map_error(status, parse_body(raw), provider=self.provider, headers=headers, url=url)

    def stream_error(self, body: Any, request_id: str | None = None) -> LLMError:
        """The mapped error for an error event (or error body) inside a 200 answer, carrying
        `request_id` (an in-stream error has no headers of its own to take it from)."""
        error = map_error(None, body, provider=self.provider)
        error.request_id = request_id
        return error

    def network_error(self, exc: httpx.HTTPError, *, started: float | None = None) -> NetworkError:
        """The error of a transport failure (connect, read timeout, cut body): retryable,
        except a connection refused before the server ever answered this transport, which
        names the URL and is final. `started` (monotonic) is when the attempt began: a
        timeout's message says how long the attempt took, and the error's `elapsed` holds it.
        """
        kind = type(exc).__name__
        url = _url_of(exc) or self.shown_url
        if not self._reached and isinstance(exc, httpx.ConnectError) and _refused(exc):
            return NetworkError(
                f"connection refused by {url}: nothing listens there (is the {self.provider} "
                "server running, and is base_url right?); not retried, as the server has "
                "never answered",
                provider=self.provider,
                retryable=False,
                code="connection_refused",
            )
        elapsed = None if started is None else time.monotonic() - started
        took = ""
        if elapsed is not None and isinstance(exc, httpx.TimeoutException):
            took = f" after {elapsed:.2f}s"
        error = NetworkError(
            f"{kind} talking to {self.provider} at {self.shown_url}{took}: {exc or kind}",
            provider=self.provider,
        )
        error.elapsed = elapsed
        return error


def check_base_url(base_url: str) -> None:
    """Refuse a `base_url` no request can go to, at construction, not at every call.

    Raises:
        ValueError: it is not an absolute http:// or https:// URL with a host.
    """
    try:
        url = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ValueError(f"invalid base_url {base_url!r}: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(
            f"invalid base_url {shown_url(base_url)!r}: expected an absolute http:// or "
            "https:// URL with a host, such as http://localhost:11434/v1"
        )


def shown_url(base_url: str) -> str:
    """`base_url` as messages and logs may show it: without its user info (a password)."""
    try:
        url = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError):
        return "(an invalid URL)"
    if not url.userinfo:
        return base_url
    return str(url.copy_with(username=None, password=None))


def _url_of(exc: httpx.HTTPError) -> str | None:
    """`scheme://host[:port]/path` of the failed request (no query, no user info)."""
    try:
        url = exc.request.url
    except RuntimeError:  # an error raised without its request
        return None
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}{url.path}"


def _refused(exc: BaseException) -> bool:
    """Whether `exc` comes from a connection refused (ECONNREFUSED) somewhere in its causes."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, ConnectionRefusedError):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False
