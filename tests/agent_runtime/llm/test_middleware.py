"""Middleware: retry, fallback with circuit breaker, caching, observability, switching."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from structlog.testing import capture_logs

from agent_runtime.abort import Aborted, AbortSignal
from agent_runtime.events import Event, ProviderRetry
from agent_runtime.llm import (
    AuthenticationError,
    BaseChatModel,
    ChatRequest,
    ChatResponse,
    ChatResponseBuilder,
    ContextLengthExceededError,
    FinishDelta,
    InvalidRequestError,
    LLMError,
    ModelInfo,
    NetworkError,
    PermissionDeniedError,
    ProviderError,
    QuotaExceededError,
    RateLimitError,
    StreamChunk,
    TextDelta,
    UsageDelta,
    is_retryable,
)
from agent_runtime.llm.middleware import (
    CachingModel,
    FallbackModel,
    ObservableModel,
    RetryingModel,
    SwitchableModel,
)
from agent_runtime.llm.middleware.retrying import backoff_delay
from agent_runtime.loop import AgentContext, LoopConfig, RetryPolicy
from agent_runtime.loop import run as loop_run
from agent_runtime.messages import TextContent, Usage, UserMessage
from agent_runtime.testing import FunctionModel
from agent_runtime.testing.scripted import ScriptedModel, ScriptedTurn

REQUEST = ChatRequest(messages=[UserMessage(content="hi")])


class FakeSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


async def collect(model, request=REQUEST, signal=None):  # type: ignore[no-untyped-def]
    return [chunk async for chunk in model.stream(request, signal=signal)]


# -- retry ---------------------------------------------------------------------------------------


def test_retryable_errors_are_retried_with_capped_exponential_backoff() -> None:
    inner = ScriptedModel(
        [ScriptedTurn(error=ProviderError("down")) for _ in range(3)] + [ScriptedTurn(text="ok")]
    )
    sleep = FakeSleep()
    model = RetryingModel(inner, base_delay=2.0, max_delay=5.0, jitter=0.0, sleep=sleep)
    assert asyncio.run(model.generate(REQUEST)).text == "ok"
    assert sleep.delays == [2.0, 4.0, 5.0]
    assert inner.call_count == 4


# Each error once with the flag that could mislead: marked retryable where it must not be
# retried, and plain where it must.
RETRY_RULE_CASES = [
    (AuthenticationError("bad key", retryable=True), False),
    (PermissionDeniedError("not yours", retryable=True), False),
    (InvalidRequestError("bad field", retryable=True), False),
    (ContextLengthExceededError("too long", retryable=True), False),
    (QuotaExceededError("no credit"), False),
    (ProviderError("down", retryable=False), False),
    (ProviderError("down"), True),
    (RateLimitError("slow"), True),
    (NetworkError("cut"), True),
]


def _retried_by_retrying_model(error: LLMError) -> bool:
    inner = ScriptedModel([ScriptedTurn(error=error), ScriptedTurn(text="ok")])
    model = RetryingModel(inner, sleep=FakeSleep())
    with contextlib.suppress(LLMError):
        asyncio.run(model.generate(REQUEST))
    return inner.call_count == 2


def _retried_by_the_loop(error: LLMError) -> bool:
    inner = ScriptedModel([ScriptedTurn(error=error), ScriptedTurn(text="ok")])
    config = LoopConfig(model=inner, retry=RetryPolicy(base_delay=0.0, jitter=0.0))

    async def events() -> list[Event]:
        prompt = [UserMessage(content="hi")]
        return [e async for e in loop_run(prompt, AgentContext(system_prompt=""), config)]

    retried = any(isinstance(e, ProviderRetry) for e in asyncio.run(events()))
    assert retried == (inner.call_count == 2)
    return retried


@pytest.mark.parametrize(
    ("error", "retried"), RETRY_RULE_CASES, ids=[f"{type(e).__name__}" for e, _ in RETRY_RULE_CASES]
)
def test_retrying_model_and_the_loop_retry_by_one_rule(error: LLMError, retried: bool) -> None:
    assert is_retryable(error) is retried
    assert _retried_by_retrying_model(error) is retried
    assert _retried_by_the_loop(error) is retried


def test_retry_after_is_honoured_up_to_its_cap() -> None:
    inner = ScriptedModel(
        [
            ScriptedTurn(error=RateLimitError("slow", retry_after=10.0)),
            ScriptedTurn(error=RateLimitError("slower", retry_after=500.0)),
            ScriptedTurn(text="ok"),
        ]
    )
    sleep = FakeSleep()
    model = RetryingModel(inner, base_delay=1.0, jitter=0.0, max_retry_after=120.0, sleep=sleep)
    asyncio.run(model.generate(REQUEST))
    assert sleep.delays == [10.0, 120.0]


def test_non_retryable_errors_are_raised_at_once() -> None:
    inner = ScriptedModel([ScriptedTurn(error=InvalidRequestError("bad")), ScriptedTurn(text="x")])
    model = RetryingModel(inner, sleep=FakeSleep())
    with pytest.raises(InvalidRequestError):
        asyncio.run(model.generate(REQUEST))
    assert inner.call_count == 1


def test_gives_up_after_max_retries_with_the_last_error() -> None:
    inner = ScriptedModel([ScriptedTurn(error=ProviderError(f"e{i}")) for i in range(5)])
    model = RetryingModel(inner, max_retries=2, sleep=FakeSleep())
    with pytest.raises(ProviderError, match="e2"):
        asyncio.run(model.generate(REQUEST))
    assert inner.call_count == 3


def test_a_stream_is_retried_before_its_first_chunk_only() -> None:
    before = ScriptedModel([ScriptedTurn(error=ProviderError("early")), ScriptedTurn(text="ok")])
    chunks = asyncio.run(collect(RetryingModel(before, sleep=FakeSleep())))
    assert any(getattr(c, "text", "") == "ok" for c in chunks)
    after = ScriptedModel(
        [ScriptedTurn(text="partial", error=ProviderError("late")), ScriptedTurn(text="ok")]
    )
    with pytest.raises(ProviderError, match="late"):
        asyncio.run(collect(RetryingModel(after, sleep=FakeSleep())))
    assert after.call_count == 1


def test_abort_ends_a_backoff_wait_early() -> None:
    inner = ScriptedModel([ScriptedTurn(error=ProviderError("down")), ScriptedTurn(text="ok")])
    waiting = threading.Event()

    async def sleep(delay: float) -> None:  # the real wait, which says when it began
        waiting.set()
        await asyncio.sleep(delay)

    model = RetryingModel(inner, base_delay=60.0, jitter=0.0, sleep=sleep)
    signal = AbortSignal()

    def abort_once_waiting() -> None:  # from another thread, as a caller's abort comes
        if waiting.wait(10):
            signal.abort("user_abort")

    threading.Thread(target=abort_once_waiting, daemon=True).start()

    async def run() -> float:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(Aborted):
            await model.generate(REQUEST, signal=signal)
        return loop.time() - started

    assert asyncio.run(run()) < 2.0
    assert inner.call_count == 1


def test_backoff_jitter_stays_within_its_band() -> None:
    for attempt in range(1, 6):
        delay = backoff_delay(
            attempt, None, base_delay=1.0, max_delay=8.0, max_retry_after=120.0, jitter=0.25
        )
        nominal = min(8.0, 2 ** (attempt - 1))
        assert nominal * 0.75 <= delay <= min(nominal * 1.25, 8.0)


def test_jitter_never_pushes_the_delay_past_its_cap() -> None:
    import random

    rng = random.Random(1)
    delays = [
        backoff_delay(
            10, None, base_delay=1.0, max_delay=30.0, max_retry_after=120.0, jitter=0.5, rng=rng
        )
        for _ in range(200)
    ]
    assert max(delays) <= 30.0 and min(delays) >= 15.0


# -- fallback ------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_fails_over_on_retryable_and_quota_errors_in_order() -> None:
    first = ScriptedModel([ScriptedTurn(error=ProviderError("down"))], provider="one")
    second = ScriptedModel([ScriptedTurn(error=QuotaExceededError("broke"))], provider="two")
    third = ScriptedModel(["from three"], provider="three")
    model = FallbackModel([first, second, third])
    assert asyncio.run(model.generate(REQUEST)).text == "from three"
    assert (first.call_count, second.call_count, third.call_count) == (1, 1, 1)


def test_does_not_fail_over_on_an_invalid_request() -> None:
    first = ScriptedModel([ScriptedTurn(error=InvalidRequestError("bad"))])
    second = ScriptedModel(["never"])
    with pytest.raises(InvalidRequestError):
        asyncio.run(FallbackModel([first, second]).generate(REQUEST))
    assert second.call_count == 0


def test_an_open_circuit_is_skipped_until_its_reset_timeout() -> None:
    clock = Clock()
    flaky = ScriptedModel([ScriptedTurn(error=ProviderError("x")) for _ in range(2)] + ["back"])
    backup = ScriptedModel(["b1", "b2", "b3", "b4"])
    model = FallbackModel([flaky, backup], failure_threshold=2, reset_timeout=30.0, clock=clock)
    assert asyncio.run(model.generate(REQUEST)).text == "b1"
    assert asyncio.run(model.generate(REQUEST)).text == "b2"
    assert model.breakers[0].state == "open"
    assert asyncio.run(model.generate(REQUEST)).text == "b3"  # skipped: circuit open
    assert flaky.call_count == 2
    clock.now = 31.0
    assert model.breakers[0].state == "half_open"
    assert asyncio.run(model.generate(REQUEST)).text == "back"  # trial call closes it
    assert model.breakers[0].state == "closed"


def test_a_half_open_circuit_lets_one_trial_call_through_of_many_at_once() -> None:
    clock = Clock()
    released = asyncio.Event()

    calls: list[str] = []

    async def slow_recovery(request: ChatRequest) -> str:
        calls.append("primary")
        await released.wait()
        return "primary"

    primary = FunctionModel(slow_recovery)
    backup = ScriptedModel(["backup"] * 10)
    model = FallbackModel([primary, backup], failure_threshold=1, reset_timeout=30.0, clock=clock)
    model.breakers[0].failed()  # open
    clock.now = 31.0  # half-open: one trial

    async def five_at_once() -> list[str]:
        tasks = [asyncio.ensure_future(model.generate(REQUEST)) for _ in range(5)]
        await asyncio.sleep(0)  # each has asked its circuits
        released.set()
        return [r.text for r in await asyncio.gather(*tasks)]

    answers = asyncio.run(five_at_once())
    assert calls == ["primary"]  # the trial; the others went to the backup
    assert sorted(answers) == ["backup"] * 4 + ["primary"]
    assert model.breakers[0].state == "closed"


def test_all_circuits_open_is_a_provider_error() -> None:
    clock = Clock()
    only = ScriptedModel([ScriptedTurn(error=ProviderError("x"))])
    model = FallbackModel([only], failure_threshold=1, clock=clock)
    with pytest.raises(ProviderError, match="x"):
        asyncio.run(model.generate(REQUEST))
    with pytest.raises(ProviderError, match="open circuits"):
        asyncio.run(model.generate(REQUEST))


def test_a_stream_that_fails_before_its_first_chunk_fails_over_and_counts_on_the_circuit() -> None:
    first = ScriptedModel([ScriptedTurn(error=ProviderError("down"))], provider="one")
    second = ScriptedModel([ScriptedTurn(chunks=["from ", "two"])], provider="two")
    model = FallbackModel([first, second], failure_threshold=1)
    chunks = asyncio.run(collect(model))
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "from two"
    assert (first.call_count, second.call_count) == (1, 1)
    assert [b.state for b in model.breakers] == ["open", "closed"]


def test_an_answer_a_backup_streamed_is_built_as_the_backups() -> None:
    # The pool's info is the primary's: the backup's answer must say who gave it, or the
    # next turn treats its own thinking signatures as another provider's and drops them.
    first = ScriptedModel([ScriptedTurn(error=ProviderError("down"))], provider="one")
    second = ScriptedModel(["from two"], provider="two", model="m2")
    pool = FallbackModel([first, second])
    assert pool.info.provider == "one"

    async def built() -> ChatResponse:
        builder = ChatResponseBuilder(model=pool.info.model, provider=pool.info.provider)
        async for chunk in pool.stream(REQUEST):
            builder.add(chunk)
        return builder.build()

    response = asyncio.run(built())
    assert (response.message.provider, response.message.model) == ("two", "m2")
    direct = asyncio.run(FallbackModel([ScriptedModel(["a"], provider="one")]).generate(REQUEST))
    assert direct.message.provider == "one"  # the primary's answer as ever


def test_a_stream_fails_over_only_before_its_first_chunk() -> None:
    first = ScriptedModel([ScriptedTurn(text="half", error=ProviderError("cut"))])
    second = ScriptedModel(["never"])
    with pytest.raises(ProviderError, match="cut"):
        asyncio.run(collect(FallbackModel([first, second])))
    assert second.call_count == 0


# -- caching -------------------------------------------------------------------------------------


def test_a_repeated_deterministic_request_is_served_from_cache_with_zero_usage() -> None:
    inner = ScriptedModel(["answer"])
    model = CachingModel(inner)
    first = asyncio.run(model.generate(REQUEST))
    again = asyncio.run(model.generate(ChatRequest(messages=[UserMessage(content="hi")])))
    assert again.text == first.text == "answer"
    assert first.usage.output_tokens > 0
    assert again.usage.input_tokens == again.usage.output_tokens == 0 and again.cost == 0.0
    assert inner.call_count == 1 and model.hits == 1


def test_an_answer_changed_by_its_caller_does_not_change_the_cache() -> None:
    model = CachingModel(ScriptedModel(["original"]))
    first = asyncio.run(model.generate(REQUEST))
    first.message.content.append(TextContent(text=" [edited by the first caller]"))
    hit = asyncio.run(model.generate(REQUEST))
    hit.message.content.append(TextContent(text=" [edited by the second]"))
    assert asyncio.run(model.generate(REQUEST)).text == "original"


def test_temperature_above_zero_bypasses_the_cache_unless_forced() -> None:
    hot = ChatRequest(messages=[UserMessage(content="hi")], temperature=0.7)
    inner = ScriptedModel(["a", "b", "c"])
    asyncio.run(CachingModel(inner).generate(hot))
    model = CachingModel(inner)
    assert asyncio.run(model.generate(hot)).text == "b"
    assert asyncio.run(model.generate(hot)).text == "c"
    forced = CachingModel(ScriptedModel(["x"]), force=True)
    asyncio.run(forced.generate(hot))
    assert asyncio.run(forced.generate(hot)).text == "x"


def test_truncated_answers_are_never_cached() -> None:
    inner = ScriptedModel([ScriptedTurn(text="cut", stop_reason="length"), "full"])
    model = CachingModel(inner)
    assert asyncio.run(model.generate(REQUEST)).truncated
    assert asyncio.run(model.generate(REQUEST)).text == "full"


def test_a_cached_stream_replays_the_same_answer() -> None:
    inner = ScriptedModel([ScriptedTurn(chunks=["a", "b"])])
    model = CachingModel(inner, max_entries=1)
    asyncio.run(collect(model))
    replayed = asyncio.run(collect(model))
    assert "".join(getattr(c, "text", "") for c in replayed if c.type == "text") == "ab"
    assert [c.usage for c in replayed if isinstance(c, UsageDelta)] == [Usage()]
    assert inner.call_count == 1


def test_lru_evicts_the_least_recently_used() -> None:
    inner = ScriptedModel(["1", "2", "3"])
    model = CachingModel(inner, max_entries=1)
    a = ChatRequest(messages=[UserMessage(content="a")])
    b = ChatRequest(messages=[UserMessage(content="b")])
    asyncio.run(model.generate(a))
    asyncio.run(model.generate(b))
    assert asyncio.run(model.generate(a)).text == "3"
    assert len(model) == 1


# -- observability -------------------------------------------------------------------------------


def observed(
    inner: ScriptedModel,
) -> tuple[ObservableModel, InMemorySpanExporter, InMemoryMetricReader]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    return ObservableModel(inner, tracer=provider.get_tracer("t"), meter=meter), exporter, reader


def test_each_call_gets_a_span_with_genai_attributes_and_token_metrics() -> None:
    model, exporter, reader = observed(ScriptedModel(["hello"], model="m1"))
    asyncio.run(model.generate(ChatRequest(messages=[UserMessage(content="hi")], temperature=0.0)))
    (span,) = exporter.get_finished_spans()
    assert span.name == "chat m1"
    attrs = dict(span.attributes or {})
    assert attrs["gen_ai.provider.name"] == "scripted"
    assert attrs["gen_ai.request.model"] == "m1"
    assert attrs["gen_ai.usage.output_tokens"] > 0
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
    names = {
        m.name
        for rm in reader.get_metrics_data().resource_metrics  # type: ignore[union-attr]
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    assert {"gen_ai.client.token.usage", "gen_ai.client.operation.duration"} <= names


def test_a_failed_call_marks_its_span_as_error() -> None:
    model, exporter, _ = observed(ScriptedModel([ScriptedTurn(error=RateLimitError("slow"))]))
    with pytest.raises(RateLimitError):
        asyncio.run(model.generate(REQUEST))
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {})["error.type"] == "rate_limited"


def test_a_stream_is_observed_to_its_end() -> None:
    model, exporter, _ = observed(ScriptedModel([ScriptedTurn(chunks=["a", "b"])]))
    asyncio.run(collect(model))
    (span,) = exporter.get_finished_spans()
    assert dict(span.attributes or {})["gen_ai.usage.output_tokens"] > 0


def test_each_call_is_logged_with_its_facts_but_no_content_by_default() -> None:
    secret = ChatRequest(messages=[UserMessage(content="the secret prompt")])
    quiet = ObservableModel(ScriptedModel(["the secret answer"], model="m1"))
    with capture_logs() as logs:
        asyncio.run(quiet.generate(secret))
    (finished,) = [entry for entry in logs if entry["event"] == "llm.call.finished"]
    assert (finished["provider"], finished["model"]) == ("scripted", "m1")
    assert finished["output_tokens"] > 0 and finished["stop_reason"] == "stop"
    assert "secret" not in repr(logs)
    chatty = ObservableModel(ScriptedModel(["the secret answer"]), log_content=True)
    with capture_logs() as logs:
        asyncio.run(chatty.generate(secret))
    (finished,) = [entry for entry in logs if entry["event"] == "llm.call.finished"]
    assert finished["answer"] == "the secret answer"


def test_a_failed_call_is_logged_with_its_error_code() -> None:
    model = ObservableModel(ScriptedModel([ScriptedTurn(error=QuotaExceededError("broke"))]))
    with capture_logs() as logs, pytest.raises(QuotaExceededError):
        asyncio.run(model.generate(REQUEST))
    (failed,) = [entry for entry in logs if entry["event"] == "llm.call.failed"]
    assert (failed["error"], failed["status"]) == ("quota_exceeded", 429)


# -- switching -----------------------------------------------------------------------------------


def test_switch_applies_to_the_next_request_and_an_inflight_stream_finishes_on_its_model() -> None:
    old = ScriptedModel([ScriptedTurn(chunks=["o", "l", "d"], chunk_delay=0.01)], model="old")
    new = ScriptedModel(["new"], model="new")
    model = SwitchableModel(old)

    async def run() -> tuple[str, str]:
        stream = model.stream(REQUEST)
        first = await anext(stream)
        model.switch_to(new)
        rest = [c async for c in stream]
        text = getattr(first, "text", "") + "".join(
            getattr(c, "text", "") for c in rest if c.type == "text"
        )
        return text, (await model.generate(REQUEST)).text

    assert asyncio.run(run()) == ("old", "new")
    assert model.info.model == "new"


class UsageThenFail(BaseChatModel):
    """First call: a usage chunk, then an in-stream failure (as Anthropic's message_start then
    overloaded_error); later calls answer."""

    def __init__(self) -> None:
        self.calls = 0

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(provider="p", model="m")

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.calls += 1
        yield UsageDelta(usage=Usage(input_tokens=5))
        if self.calls == 1:
            raise ProviderError("overloaded right after message_start")
        yield TextDelta(text="ok")
        yield FinishDelta(reason="stop")


def test_a_usage_chunk_alone_does_not_stop_a_stream_retry() -> None:
    model = UsageThenFail()
    chunks = asyncio.run(collect(RetryingModel(model, sleep=FakeSleep())))
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["ok"]
    assert model.calls == 2


def test_a_usage_chunk_alone_does_not_stop_a_stream_failover() -> None:
    backup = ScriptedModel(["from backup"])
    chunks = asyncio.run(collect(FallbackModel([UsageThenFail(), backup])))
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["from backup"]
