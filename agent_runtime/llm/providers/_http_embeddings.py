"""HttpEmbeddingModel, the base of the HTTP embedding adapters: transport, info, API key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

import httpx

from agent_runtime.llm._embeddings import BaseEmbeddingModel
from agent_runtime.llm._transport import ApiKey, Transport, api_key_now
from agent_runtime.llm.types import ModelInfo


class EmbeddingHttpOptions(TypedDict, total=False):
    """Keyword options every HTTP embedding adapter accepts (defaults in `HttpEmbeddingModel`)."""

    timeout: float
    connect_timeout: float
    request_timeout: float | None
    max_batch_size: int
    transport: httpx.AsyncBaseTransport | None


class HttpEmbeddingModel(BaseEmbeddingModel):
    """An embedding model over one provider's HTTP API through a pooled `Transport` (the chat
    adapters' one: same error mapping, same timeouts).

    The API key is resolved on every request (a callable is called each time, the key
    variables re-read). `max_batch_size` caps the texts of one request (a larger call is
    split); `timeout`/`connect_timeout` are httpx's, `request_timeout` bounds each request
    (a retryable `NetworkError` naming it); `transport` replaces the network (tests).
    """

    def __init__(
        self,
        model: str,
        *,
        provider: str,
        base_url: str,
        api_key: ApiKey,
        api_key_envs: Sequence[str],
        default_batch_size: int,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        request_timeout: float | None = 120.0,
        max_batch_size: int | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if request_timeout is not None and not request_timeout > 0:  # NaN too
            raise ValueError(
                f"invalid request_timeout {request_timeout!r} (expected seconds > 0, or None)"
            )
        size = default_batch_size if max_batch_size is None else max_batch_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"invalid max_batch_size {size!r} (expected an int >= 1)")
        self.max_batch_size = size
        self._api_key = api_key
        self._api_key_envs = tuple(api_key_envs)
        self._info = ModelInfo(provider=provider, model=model, capabilities=frozenset())
        self._transport = Transport(
            base_url=base_url,
            provider=provider,
            headers=self._headers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            idle_timeout=None,
            transport=transport,
        )

    @property
    def info(self) -> ModelInfo:
        """Provider and model name (no chat capabilities)."""
        return self._info

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._transport.base_url

    def _headers(self) -> dict[str, str]:
        raise NotImplementedError

    def _api_key_now(self, hint: str = "") -> str | None:
        """The key for the next request: `api_key` (a callable called now), else the first key
        variable set now; None when the model has no key variables (a keyless server).

        Raises:
            AuthenticationError: the key resolved empty, or no key variable is set (named).
        """
        return api_key_now(self._api_key, self._api_key_envs, self._info.provider, hint)

    async def aclose(self) -> None:
        """Close the pooled HTTP client of the running event loop."""
        await self._transport.aclose()
