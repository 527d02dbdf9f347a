"""FallbackModel: ordered failover across models, each behind a circuit breaker."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass

from agent_runtime.abort import AbortSignal
from agent_runtime.llm.base import BaseChatModel, ChatModel
from agent_runtime.llm.errors import (
    AuthenticationError,
    LLMError,
    ModelNotFoundError,
    NetworkError,
    PermissionDeniedError,
    ProviderError,
    QuotaExceededError,
    is_retryable,
)
from agent_runtime.llm.types import (
    ChatRequest,
    ChatResponse,
    FinishDelta,
    ModelInfo,
    StreamChunk,
    UsageDelta,
)
from supervisors._log import get_logger

log = get_logger(__name__)

Clock = Callable[[], float]


def fails_over(error: LLMError) -> bool:
    """Whether another model may succeed where this one failed.

    Yes for retryable errors (`is_retryable`), quota exhaustion, failures tied to one
    provider account (authentication, permission, unknown model) and a server that refuses
    connections; no for errors in the request itself (invalid request, context too long),
    which every model would reject alike.
    """
    return (
        is_retryable(error)
        or isinstance(
            error,
            QuotaExceededError | AuthenticationError | PermissionDeniedError | ModelNotFoundError,
        )
        or (isinstance(error, NetworkError) and error.code == "connection_refused")
    )


@dataclass
class _Circuit:
    failures: int = 0
    opened_at: float | None = None
    trial_at: float | None = None  # half-open: when the one trial call went through


class CircuitBreaker:
    """Per-model circuit: opens after `failure_threshold` consecutive failures, lets one
    trial call through after `reset_timeout` seconds (half-open), closes on a success.
    Thread-safe."""

    def __init__(self, failure_threshold: int, reset_timeout: float, clock: Clock) -> None:
        if failure_threshold < 1:
            raise ValueError(f"invalid failure_threshold {failure_threshold!r} (expected >= 1)")
        if reset_timeout <= 0:
            raise ValueError(f"invalid reset_timeout {reset_timeout!r} (expected > 0)")
        self.failure_threshold = failure_threshold
        self.reset_timeout = reset_timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._state = _Circuit()

    @property
    def state(self) -> str:
        """`closed`, `open` or `half_open`."""
        with self._lock:
            return self._state_locked()

    def _state_locked(self) -> str:
        if self._state.opened_at is None:
            return "closed"
        if self._clock() - self._state.opened_at >= self.reset_timeout:
            return "half_open"
        return "open"

    def allows(self) -> bool:
        """Whether a call may go through now: closed, or half-open and no trial call is out
        (this call is the trial then; one whose outcome never came, a call cancelled or
        failed with an error that does not count, is given up after `reset_timeout`)."""
        with self._lock:
            state = self._state_locked()
            if state != "half_open":
                return state == "closed"
            now = self._clock()
            trial = self._state.trial_at
            if trial is not None and now - trial < self.reset_timeout:
                return False
            self._state.trial_at = now
            return True

    def succeeded(self) -> None:
        with self._lock:
            self._state = _Circuit()

    def failed(self) -> None:
        with self._lock:
            self._state.failures += 1
            self._state.trial_at = None
            if self._state.opened_at is not None or self._state.failures >= self.failure_threshold:
                self._state.opened_at = self._clock()


class FallbackModel(BaseChatModel):
    """Tries `models` in order; skips a model whose circuit is open; fails over on errors
    that another model may not have (`fails_over`), raises the others at once.

    A stream fails over only before its first chunk. When every model failed, the last
    error is raised; when every circuit is open, `ProviderError` says so. `info` is the
    first model's.
    """

    def __init__(
        self,
        models: Sequence[ChatModel],
        *,
        failure_threshold: int = 3,
        reset_timeout: float = 30.0,
        clock: Clock = time.monotonic,
    ) -> None:
        if not models:
            raise ValueError("FallbackModel needs at least one model")
        self.models = list(models)
        self.breakers = [CircuitBreaker(failure_threshold, reset_timeout, clock) for _ in models]

    @property
    def info(self) -> ModelInfo:
        """The primary (first) model's info."""
        return self.models[0].info

    def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        return self.stream(request)

    def _candidates(self) -> Iterator[tuple[ChatModel, CircuitBreaker]]:
        """The models to try, in order, each asked whether its circuit allows a call only
        when its turn comes (a half-open one's trial is the call made then).

        Raises:
            ProviderError: no circuit allowed a call.
        """
        tried = False
        for model, breaker in zip(self.models, self.breakers, strict=True):
            if breaker.allows():
                tried = True
                yield model, breaker
        if not tried:
            raise ProviderError(
                f"all {len(self.models)} models of the fallback chain have open circuits",
                retryable=True,
            )

    def _failed(self, model: ChatModel, breaker: CircuitBreaker, error: LLMError) -> None:
        breaker.failed()
        log.warning(
            "llm.fallback.failed_over",
            provider=model.info.provider,
            model=model.info.model,
            error=error.code,
            circuit=breaker.state,
        )

    async def generate(
        self, request: ChatRequest, *, signal: AbortSignal | None = None
    ) -> ChatResponse:
        """The first answer any model in order gives.

        Raises:
            LLMError: a non-failover error, the last model's error, or all circuits open.
        """
        last: LLMError | None = None
        for model, breaker in self._candidates():
            try:
                response = await model.generate(request, signal=signal)
            except LLMError as error:
                if not fails_over(error):
                    raise
                self._failed(model, breaker, error)
                last = error
                continue
            breaker.succeeded()
            return response
        assert last is not None
        raise last

    def stream(
        self, request: ChatRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StreamChunk]:
        """The first model's stream that starts; fails over only before its first chunk."""
        return self._failover_stream(request, signal)

    async def _failover_stream(
        self, request: ChatRequest, signal: AbortSignal | None
    ) -> AsyncIterator[StreamChunk]:
        last: LLMError | None = None
        for model, breaker in self._candidates():
            started = False
            # The pool's info is the primary's: a backup's answer names its model at its end.
            serving = None if model is self.models[0] else model.info
            try:
                async for chunk in model.stream(request, signal=signal):
                    # Usage is replaced, never summed, so a usage chunk (Anthropic sends one at
                    # message_start) commits nothing: failing over after it is still safe.
                    if not started and not isinstance(chunk, UsageDelta):
                        started = True
                        breaker.succeeded()
                    # (An inner pool's backup may have named itself already.)
                    if serving and isinstance(chunk, FinishDelta) and chunk.provider is None:
                        chunk = chunk.model_copy(
                            update={"provider": serving.provider, "model": serving.model}
                        )
                    yield chunk
                return
            except LLMError as error:
                if started or not fails_over(error):
                    raise
                self._failed(model, breaker, error)
                last = error
        assert last is not None
        raise last
