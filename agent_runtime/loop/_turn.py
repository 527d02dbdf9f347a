"""One model call of a run: stream the answer as events, retrying retryable provider failures."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from agent_runtime._trusted import trusted
from agent_runtime.abort import Aborted, AbortSignal
from agent_runtime.events import (
    Event,
    MessageDelta,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ProviderRetry,
    ProviderRetryEnd,
    delta_of,
)
from agent_runtime.guardrails._runner import GuardrailRunner, request_text, response_text
from agent_runtime.llm._abortable import aclose_quietly, await_abortable, iterate_abortable
from agent_runtime.llm.base import BaseChatModel
from agent_runtime.llm.builder import ChatResponseBuilder
from agent_runtime.llm.errors import ContextLengthExceededError, LLMError, is_retryable
from agent_runtime.llm.middleware.retrying import backoff_delay
from agent_runtime.llm.types import (
    ChatRequest,
    StreamChunk,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from agent_runtime.loop._call_ids import call_ids_in, unique_call_ids
from agent_runtime.loop._overflow import halved
from agent_runtime.loop._transcript import TranscriptState, validate_transcript
from agent_runtime.loop.types import LoopConfig, RetryPolicy, Stamp, UpdateSink
from agent_runtime.messages import (
    AssistantMessage,
    Message,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
)
from agent_runtime.tools import Tool


def open_stream(
    request: ChatRequest, config: LoopConfig, signal: AbortSignal
) -> AsyncIterator[StreamChunk]:
    """The model's stream for `request`, closed at once on abort.

    A `BaseChatModel` (every adapter and middleware) races its reads against the signal
    itself; any other `ChatModel` is wrapped so that one ignoring `signal` cannot hold an
    aborted run.
    """
    chunks = config.model.stream(request, signal=signal)
    if isinstance(config.model, BaseChatModel):
        return chunks
    return iterate_abortable(chunks, signal)


def retry_delay(attempt: int, error: LLMError, policy: RetryPolicy) -> float:
    """Seconds before retry number `attempt`: the jittered backoff, never above `max_delay`
    (the jitter spreads below the cap, not past it) unless a retry-after hint asks for more,
    honoured up to `max_retry_after`."""
    return backoff_delay(
        attempt,
        error,
        base_delay=policy.base_delay,
        max_delay=policy.max_delay,
        max_retry_after=policy.max_retry_after,
        jitter=policy.jitter,
    )


@dataclass
class TurnOutcome:
    """How a model call ended: an answer to commit, or the run's end (error or abort)."""

    message: AssistantMessage | None = None
    error: str | None = None
    partial: AssistantMessage | None = None
    aborted: str | None = None


def is_empty(message: AssistantMessage) -> bool:
    """An answer with no tool call and no text or thinking worth keeping."""
    for block in message.content:
        if isinstance(block, TextContent) and block.text.strip():
            return False
        if isinstance(block, ThinkingContent) and (block.thinking.strip() or block.signature):
            return False
        if not isinstance(block, TextContent | ThinkingContent):
            return False
    return True


def _tool_choice(choice: str | None, messages: list[Message]) -> str | None:
    """A forced choice (a tool's name, or `required`) holds until the model has called: the
    call that answers tool results gets `auto`, so the run can end with a text answer rather
    than call the forced tool until `max_tool_turns` (as the OpenAI Agents SDK resets it)."""
    if choice in (None, "auto", "none") or not messages:
        return choice
    return "auto" if isinstance(messages[-1], ToolResultMessage) else choice


async def build_request(
    messages: list[Message],
    system_prompt: str,
    tools: Sequence[Tool],
    config: LoopConfig,
    transcript: TranscriptState | None = None,
) -> tuple[ChatRequest | None, list[str]]:
    """The request for the next call, or the transcript violations that forbid the call.

    `messages` is a list of the caller's own making, which the request takes over as it is
    (the caller must not change it afterwards).
    With no `transform_context` or `convert_to_llm`, the messages sent are the run's own:
    `transcript` (the run's incremental check of them) is brought up to date with what was
    added since the last call, and the request is built without validating them again (each
    was validated where it entered), so a call costs the same whatever the history's length.
    """
    fields: dict[str, Any] = {
        "system": system_prompt or None,
        "tools": [tool.spec() for tool in tools],
        "tool_choice": _tool_choice(config.tool_choice, messages) if tools else None,
        "temperature": config.temperature,
        "max_output_tokens": config.max_output_tokens,
        "reasoning": config.reasoning,
    }
    if transcript is not None:  # kept up to date on both paths: stream_turn reads its ids
        transcript.feed(messages[transcript.count :])
    if (
        transcript is not None
        and config.transform_context is None
        and config.convert_to_llm is None
    ):
        violations = transcript.violations()
        if violations:
            return None, violations
        fields["messages"], fields["response_schema"] = messages, None
        request = trusted(ChatRequest, fields)
        request.mark_vision(transcript.vision)
        return request, []
    sent = messages
    if config.transform_context is not None:
        transformed = config.transform_context(sent)
        if inspect.isawaitable(transformed):
            transformed = await transformed
        sent = list(transformed)
    if config.convert_to_llm is not None:
        sent = list(config.convert_to_llm(sent))
    violations = validate_transcript(sent)
    if violations:
        return None, violations
    return ChatRequest(messages=sent, **fields), []


def _delta(chunk: StreamChunk, index: int) -> MessageDelta | None:
    if isinstance(chunk, TextDelta):
        return delta_of("text", index, chunk.text)
    if isinstance(chunk, ThinkingDelta):
        return delta_of("thinking", index, chunk.text)
    if isinstance(chunk, ToolCallDelta):
        return delta_of("tool_call", index, chunk.arguments)
    return None


async def stream_turn(
    request: ChatRequest,
    config: LoopConfig,
    signal: AbortSignal,
    stamp: Stamp,
    outcome: TurnOutcome,
    transcript: TranscriptState | None = None,
    *,
    guards: GuardrailRunner | None = None,
    on_update: UpdateSink | None = None,
) -> AsyncGenerator[Event, None]:
    """Call the model, yielding MessageStart/Update/End and retry events; fill `outcome`.

    `guards` check the request once before the first attempt (a blocking failure: no call,
    `outcome.error` is the guardrail's reason) and the answer once it is complete (a blocking
    failure: its MessageEnd has stop_reason `error`, it is not committed, and `outcome.error`
    is the reason); the streamed deltas before that are not held back.

    `on_update`, when given, takes each `MessageUpdate` instead of the generator yielding it
    (the run's one consumer handing a token on without two generator layers in between); an
    awaitable it returns is awaited before the next chunk is read (backpressure). While it
    hears nobody, no `MessageUpdate` is made (`UpdateSink.unheard`).

    A failed attempt ends with a MessageEnd of its partial message (stop_reason `error`) and
    is never committed; its tool calls never run. An abort (of the stream or of a backoff
    wait) ends with the partial message minus its tool calls (stop_reason `aborted`). The
    answer's tool calls get fresh ids where the provider's are missing or already used in
    the transcript (`unique_call_ids`, against `transcript`'s ids, else the request's).
    A `ContextLengthExceededError` is not retried, except once when `transform_context` is
    set: the messages are shrunk to half its budget (`_overflow.halved`) and the call made
    again, with `ProviderRetry`/`ProviderRetryEnd` events as for any retry.
    """
    model = config.model
    policy = config.retry
    attempt = 0
    shrink = config.transform_context  # None once the overflow's one retry is spent
    if guards is not None and guards.watches("model_request"):
        trip = await guards.check("model_request", request_text(request.messages))
        if trip is not None:
            outcome.error = trip.reason
            return
    while True:
        info = model.info
        builder = ChatResponseBuilder(model=info.model, provider=info.provider)
        started = False
        unheard = False  # on_update was given the growing answer and hears nobody since
        try:
            chunks = open_stream(request, config, signal)
            try:
                async for chunk in chunks:
                    if not started:
                        started = True
                        yield stamp(MessageStart, message=builder.snapshot())
                    index = builder.add(chunk)
                    if index is None:
                        continue
                    if on_update is not None and not on_update.heard():
                        if not unheard:
                            unheard = True
                            on_update.unheard(builder.snapshot)
                        continue
                    delta = _delta(chunk, index)
                    if delta is not None:
                        unheard = False
                        update = stamp(
                            MessageUpdate, snapshot=builder.deferred_snapshot(), delta=delta
                        )
                        if on_update is None:
                            yield update
                        elif (wait := on_update.update(update)) is not None:
                            await wait
            finally:
                await aclose_quietly(chunks)  # a run closed mid-answer closes it now, not at GC
            response = builder.build()
        except Aborted as abort:
            partial = builder.snapshot(stop_reason="aborted", with_calls=False)
            if started:
                yield stamp(MessageEnd, message=partial)
            if attempt:
                yield stamp(ProviderRetryEnd, attempt=attempt, outcome="aborted")
            outcome.aborted, outcome.partial = str(abort.reason), partial
            return
        except LLMError as error:
            partial = builder.snapshot(stop_reason="error", with_calls=False, error=str(error))
            if started:
                yield stamp(MessageEnd, message=partial)
            if attempt:
                yield stamp(ProviderRetryEnd, attempt=attempt, outcome="failed")
            if isinstance(error, ContextLengthExceededError) and shrink is not None:
                # The one retry of an overflow (DESIGN.md 7): the transform at half budget.
                smaller, shrink = await halved(request, shrink), None
                if smaller is not None:
                    request, attempt = smaller, attempt + 1
                    yield stamp(ProviderRetry, attempt=attempt, delay=0.0, error=str(error))
                    continue
            if not is_retryable(error) or attempt >= policy.max_retries:
                outcome.error, outcome.partial = f"{error.code}: {error.message}", partial
                return
            attempt += 1
            delay = retry_delay(attempt, error, policy)
            yield stamp(ProviderRetry, attempt=attempt, delay=delay, error=str(error))
            try:
                await await_abortable(asyncio.sleep(delay), signal)
            except Aborted as abort:
                yield stamp(ProviderRetryEnd, attempt=attempt, outcome="aborted")
                outcome.aborted = str(abort.reason)
                return
            continue
        if attempt:
            yield stamp(ProviderRetryEnd, attempt=attempt, outcome="succeeded")
        taken = transcript.call_ids if transcript is not None else call_ids_in(request.messages)
        message = unique_call_ids(response.message, taken)
        if is_empty(message) and message.stop_reason != "length":
            if not started:
                yield stamp(MessageStart, message=message)
            failed = message.model_copy(
                update={"stop_reason": "error", "error_message": "empty_assistant_response"}
            )
            yield stamp(MessageEnd, message=failed)
            outcome.error, outcome.partial = "empty_assistant_response", failed
            return
        if not started:
            yield stamp(MessageStart, message=message)
        if guards is not None and guards.watches("model_response"):
            trip = await guards.check("model_response", response_text(message))
            if trip is not None:
                blocked = message.model_copy(
                    update={"stop_reason": "error", "error_message": trip.reason}
                )
                yield stamp(MessageEnd, message=blocked)
                outcome.error, outcome.partial = trip.reason, blocked
                return
        outcome.message = message
        return
