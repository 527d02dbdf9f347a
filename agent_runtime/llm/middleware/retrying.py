"""RetryingModel: retries retryable provider failures with capped, jittered exponential backoff."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable

from agent_runtime.abort import AbortSignal
from agent_runtime.llm._abortable import await_abortable
from agent_runtime.llm.base import ChatModel
from agent_runtime.llm.errors import LLMError, is_retryable
from agent_runtime.llm.middleware._base import Middleware
from agent_runtime.llm.types import ChatRequest, ChatResponse, StreamChunk, UsageDelta
from supervisors._log import get_logger

log = get_logger(__name__)

Sleep = Callable[[float], Awaitable[None]]
RetryHook = Callable[[int, float, LLMError], None]


def backoff_delay(
    attempt: int,
    error: LLMError | None,
    *,
    base_delay: float,
    max_delay: float,
    max_retry_after: float,
    jitter: float,
    rng: random.Random | None = None,
) -> float:
    """Seconds to wait before retry number `attempt` (1-based).

    `base_delay * 2**(attempt-1)` spread by +-`jitter` (a fraction), never above `max_delay`
    (the spread stays under the cap); a provider's retry-after hint wins when it is longer,
    honoured up to `max_retry_after`.
    """
    delay = base_delay * 2 ** (attempt - 1)
    if jitter:
        delay *= 1 + (rng or random).uniform(-jitter, jitter)
    delay = min(delay, max_delay)
    if error is not None and error.retry_after is not None:
        delay = max(delay, min(error.retry_after, max_retry_after))
    return max(float(delay), 0.0)


class RetrySchedule:
    """When to retry an `LLMError` and how long to wait first: what `RetryingModel` and
    `RetryingEmbeddingModel` share. Retried: what `is_retryable` allows, up to `max_retries`
    times; each wait is `backoff_delay`, logged (`retry_event`), reported to `on_retry`, and
    ended early with `Aborted` when the caller's signal is aborted."""

    retry_event = "llm.retry.scheduled"

    def __init__(
        self,
        *,
        max_retries: int,
        base_delay: float,
        max_delay: float,
        max_retry_after: float,
        jitter: float,
        sleep: Sleep,
        on_retry: RetryHook | None,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"invalid max_retries {max_retries!r} (expected >= 0)")
        if not 0 <= jitter < 1:
            raise ValueError(f"invalid jitter {jitter!r} (expected 0 <= jitter < 1)")
        self.max_retries = max_retries
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_retry_after = max_retry_after
        self.jitter = jitter
        self._sleep = sleep
        self._on_retry = on_retry

    def _should_retry(self, error: LLMError, attempt: int) -> bool:
        return is_retryable(error) and attempt <= self.max_retries

    async def _wait_before(self, attempt: int, error: LLMError, signal: AbortSignal | None) -> None:
        delay = backoff_delay(
            attempt,
            error,
            base_delay=self.base_delay,
            max_delay=self.max_delay,
            max_retry_after=self.max_retry_after,
            jitter=self.jitter,
        )
        log.info(
            self.retry_event,
            attempt=attempt,
            delay=round(delay, 3),
            error=error.code,
            status=error.status,
            provider=error.provider,
        )
        if self._on_retry is not None:
            self._on_retry(attempt, delay, error)
        await await_abortable(self._sleep(delay), signal)


class RetryingModel(RetrySchedule, Middleware):
    """Retries the `LLMError`s `is_retryable` allows (the agent loop's rule too: marked
    retryable, and never an authentication, permission or invalid-request error); anything
    else is raised at once.

    A stream is retried only while it has yielded nothing: once a chunk reached the caller,
    a failure is raised (the caller may already have shown the partial answer). Waiting
    between attempts ends early, with `Aborted`, when `signal` is aborted. After the last
    retry the last error is raised.
    """

    def __init__(
        self,
        inner: ChatModel,
        *,
        max_retries: int = 3,
        base_delay: float = 2.0,
        max_delay: float = 30.0,
        max_retry_after: float = 120.0,
        jitter: float = 0.1,
        sleep: Sleep = asyncio.sleep,
        on_retry: RetryHook | None = None,
    ) -> None:
        Middleware.__init__(self, inner)
        RetrySchedule.__init__(
            self,
            max_retries=max_retries,
            base_delay=base_delay,
            max_delay=max_delay,
            max_retry_after=max_retry_after,
            jitter=jitter,
            sleep=sleep,
            on_retry=on_retry,
        )

    async def generate(
        self, request: ChatRequest, *, signal: AbortSignal | None = None
    ) -> ChatResponse:
        """`generate` with retries.

        Raises:
            LLMError: not retryable, or still failing after `max_retries` retries.
            Aborted: `signal` aborted (also during a backoff wait).
        """
        attempt = 0
        while True:
            try:
                return await self.inner.generate(request, signal=signal)
            except LLMError as error:
                attempt += 1
                if not self._should_retry(error, attempt):
                    raise
                await self._wait_before(attempt, error, signal)

    def stream(
        self, request: ChatRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StreamChunk]:
        """`stream` with retries before the first chunk only."""
        return self._stream_with_retries(request, signal)

    async def _stream_with_retries(
        self, request: ChatRequest, signal: AbortSignal | None
    ) -> AsyncIterator[StreamChunk]:
        attempt = 0
        while True:
            started = False
            try:
                async for chunk in self.inner.stream(request, signal=signal):
                    # A usage chunk commits nothing (usage is replaced, not summed): retrying
                    # after one, as after Anthropic's message_start, is still safe.
                    started = started or not isinstance(chunk, UsageDelta)
                    yield chunk
                return
            except LLMError as error:
                attempt += 1
                if started or not self._should_retry(error, attempt):
                    raise
                await self._wait_before(attempt, error, signal)
