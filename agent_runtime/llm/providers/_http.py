"""HttpChatModel, the base of the HTTP adapters: transport, model info and the API key."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Sequence
from typing import ClassVar, TypedDict

import httpx

from agent_runtime._thinking import ThinkingBudgets
from agent_runtime.llm._sync import run_sync
from agent_runtime.llm._transport import ApiKey, Transport, api_key_now
from agent_runtime.llm.base import BaseChatModel
from agent_runtime.llm.types import ALL_CAPABILITIES, Capability, ModelInfo, ModelPricing


class HttpOptions(TypedDict, total=False):
    """Keyword options every HTTP adapter accepts (defaults in `HttpChatModel`)."""

    timeout: float
    connect_timeout: float
    request_timeout: float | None
    idle_timeout: float | None
    capabilities: Iterable[Capability] | None
    pricing: ModelPricing | None
    thinking_budgets: ThinkingBudgets | None
    transport: httpx.AsyncBaseTransport | None


class HttpChatModel(BaseChatModel):
    """A ChatModel over one provider's HTTP API through a pooled `Transport`.

    Holds what every adapter shares: `info`, `base_url`, `thinking_budgets`, `aclose`,
    `list_models_sync`, and the API key, resolved on every request by `_api_key_now`.
    Subclasses implement `_headers` (called for every request, so rotated keys reach
    retries), `_stream` and `list_models`; every adapter is a `ModelDirectory`.

    `timeout` is httpx's read timeout in seconds (any byte resets it), `connect_timeout` the
    connect one; `request_timeout` bounds a whole call, `idle_timeout` a stream's wait for its
    next data event (SSE comments and keep-alive pings do not count); either ends the call
    with a retryable `NetworkError` naming it (None: no bound). `capabilities` defaults to all
    five; with `pricing`, responses carry `cost`; `thinking_budgets` gives the
    token budget of each reasoning level; `transport` replaces the network (tests).
    """

    # appended to the missing-key message, e.g. how to go without a key
    _missing_key_hint: ClassVar[str] = ""

    def __init__(
        self,
        model: str,
        *,
        provider: str,
        base_url: str,
        api_key: ApiKey,
        api_key_envs: Sequence[str],
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        request_timeout: float | None = 600.0,
        idle_timeout: float | None = 120.0,
        capabilities: Iterable[Capability] | None = None,
        pricing: ModelPricing | None = None,
        thinking_budgets: ThinkingBudgets | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        for name, seconds in (("request_timeout", request_timeout), ("idle_timeout", idle_timeout)):
            if seconds is not None and not seconds > 0:  # NaN too
                raise ValueError(f"invalid {name} {seconds!r} (expected seconds > 0, or None)")
        self.thinking_budgets = thinking_budgets or ThinkingBudgets()
        self._api_key = api_key
        self._api_key_envs = tuple(api_key_envs)
        self._info = ModelInfo(
            provider=provider,
            model=model,
            capabilities=frozenset(ALL_CAPABILITIES if capabilities is None else capabilities),
            pricing=pricing,
        )
        self._transport = Transport(
            base_url=base_url,
            provider=provider,
            headers=self._headers,
            timeout=timeout,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            idle_timeout=idle_timeout,
            transport=transport,
        )

    @property
    def info(self) -> ModelInfo:
        """Provider, model name, capabilities (all five unless told) and pricing."""
        return self._info

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return self._transport.base_url

    @abstractmethod
    async def list_models(self) -> list[str]:
        """The ids of the models the provider serves (`ModelDirectory`).

        Raises:
            LLMError: the call failed (mapped as for `generate`).
        """

    def list_models_sync(self, *, timeout: float | None = None) -> list[str]:
        """`list_models` on the sync bridge loop, waiting up to `timeout` seconds.

        Raises:
            LLMError: as `list_models`.
            RuntimeError: called from a running event loop (await `list_models` instead).
            TimeoutError: `timeout` passed (the call was cancelled).
        """
        return run_sync(self.list_models(), timeout)

    @abstractmethod
    def _headers(self) -> dict[str, str]:
        """The headers of every request, the API key among them."""

    def _api_key_now(self) -> str | None:
        """The API key for the next request: the `api_key` given (a callable is called now),
        else the first of the key variables that is set, read now; None when the model has
        no key variables (a keyless server).

        Raises:
            AuthenticationError: the key given resolved to an empty value, or no key variable
                is set (the message names them).
        """
        return api_key_now(
            self._api_key, self._api_key_envs, self._info.provider, self._missing_key_hint
        )

    async def aclose(self) -> None:
        """Close the pooled HTTP client of the running event loop (a later call opens a new one)."""
        await self._transport.aclose()
