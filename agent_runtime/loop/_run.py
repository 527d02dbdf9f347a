"""The stateless agent loop: one run as an async generator of events."""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import aclosing
from typing import Any, TypeVar

from agent_runtime._key import AgentKey
from agent_runtime._run_ids import new_run_id
from agent_runtime.abort import AbortSignal
from agent_runtime.events import (
    AgentEnd,
    AgentStart,
    Canceled,
    Error,
    Event,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    TurnEnd,
    TurnStart,
    deferred_update,
)
from agent_runtime.guardrails._runner import GuardrailRunner
from agent_runtime.loop._approval import edited_args, replace_amended, with_edited_args
from agent_runtime.loop._batch import ToolBatch
from agent_runtime.loop._output import OutputTurns
from agent_runtime.loop._resume import ResumeOutcome, resumed_turn
from agent_runtime.loop._trace import RunTrace, debug_logged
from agent_runtime.loop._transcript import TranscriptState
from agent_runtime.loop._turn import TurnOutcome, build_request, stream_turn
from agent_runtime.loop.types import AgentContext, LoopConfig, MessagesGetter, UpdateSink
from agent_runtime.messages import (
    AssistantMessage,
    Message,
    MessageAdapter,
    TextContent,
    ToolResultMessage,
    UserMessage,
)
from supervisors._log import get_logger

log = get_logger(__name__)

# The events `stamp` builds without validating (their fields: the run's key, its messages).
E = TypeVar("E", bound=Event)


class _Run:
    """The state of one run, private to the generator that drives it."""

    def __init__(
        self,
        prompts: Sequence[Message],
        context: AgentContext,
        config: LoopConfig,
        signal: AbortSignal | None,
        on_update: UpdateSink | None = None,
    ) -> None:
        self.prompts = _checked(prompts)
        self.on_update = on_update
        self.system_prompt = context.system_prompt
        self.tools = list(context.tools)
        # The transcript is `history` then `new_messages`. A tuple cannot change under the run
        # (an agent's snapshot of its history): taken as it is, not copied again.
        messages = context.messages
        self.history: Sequence[Message] = (
            messages if isinstance(messages, tuple) else list(messages)
        )
        self.history_len = len(self.history)
        known = context.transcript
        # The caller's check of the context's messages, taken over (AgentContext says so), when
        # it matches them (else from scratch).
        self.transcript = (
            known if known is not None and known.count == self.history_len else TranscriptState()
        )
        self.new_messages: list[Message] = []
        self.config = config
        self.signal = signal if signal is not None else AbortSignal()
        self.seq = 0
        self.tool_turns = 0
        self.pending: list[Message] = []  # taken from a getter, not yet delivered
        self.pending_are_follow_ups = False
        self.output = OutputTurns(config.output) if config.output is not None else None
        self.feedback: list[Message] = []  # what the output check tells the model next turn
        key = config.agent
        info = config.model.info
        run_id = config.run_id or new_run_id()
        self.agent, self.run_id = key, run_id
        self.trace = RunTrace(
            key, run_id, info.model, info.provider, config.trace_links, config.model
        )
        self.debug = debug_logged(log)  # this module's debug lines (`log` binds on first use)
        self.guards = (
            GuardrailRunner(config.guardrails, key, run_id, self.trace.add_event)
            if config.guardrails
            else None
        )

    @functools.cached_property
    def log(self) -> Any:
        """The run's logger, bound on first use (most runs log nothing at the default level)."""
        key = self.agent
        return log.bind(
            run_id=self.run_id,
            session=key.session if key else None,
            role=key.role if key else None,
            index=key.index if key else None,
        )

    def stamp(self, kind: type[E], /, **fields: Any) -> E:
        """A new event of the run, built with its identity and next `seq` (never copied)."""
        self.seq += 1
        if kind is MessageUpdate and "snapshot" in fields:  # the per-token event: no message yet
            update = deferred_update(
                fields["snapshot"], fields["delta"], self.agent, self.run_id, self.seq
            )
            return update  # type: ignore[return-value]  # E is MessageUpdate here
        fields["agent"], fields["run_id"], fields["seq"] = self.agent, self.run_id, self.seq
        event = kind(**fields)
        if self.trace.enabled:
            self.trace.observe(event)
        return event

    def messages(self) -> list[Message]:
        """The transcript so far, as a new list (one copy: what a request is built from)."""
        return [*self.history, *self.new_messages]

    def commit(self, message: Message) -> list[Event]:
        """Add a message to the transcript; MessageStart/MessageEnd announce it."""
        self.new_messages.append(message)
        return [self.stamp(MessageStart, message=message), self.stamp(MessageEnd, message=message)]

    def amend(
        self, message: AssistantMessage, call_id: str, args: dict[str, Any]
    ) -> AssistantMessage:
        """`message`, an answer of this run, with the arguments of its call `call_id` as a
        human edited them on approval, in its place among the run's new messages."""
        amended = with_edited_args(message, call_id, args)
        replace_amended(self.new_messages, message, amended)
        return amended

    def take_steering(self) -> list[Message]:
        """Steering queued by the owner; nothing once aborted (it stays in the queue)."""
        return self._take(self.config.get_steering_messages)

    def take_follow_ups(self) -> list[Message]:
        """Follow-ups queued by the owner; nothing once aborted (they stay in the queue)."""
        return self._take(self.config.get_follow_up_messages)

    def _take(self, getter: MessagesGetter | None) -> list[Message]:
        if getter is None or self.signal.aborted:
            return []
        return _checked(getter())

    def deliver_pending(self) -> Iterator[Event]:
        """Commit the pending messages. Each leaves `pending` once its MessageStart is out, so
        a run closed at that MessageStart hands it back and one closed later does not."""
        while self.pending:
            start, end = self.commit(self.pending[0])
            yield start
            del self.pending[0]
            yield end
        self.pending_are_follow_ups = False

    def hand_back(self) -> None:
        """Return messages taken from a getter but not delivered, so no queued message is lost."""
        pending, self.pending = self.pending, []
        if not pending:
            return
        config = self.config
        if self.pending_are_follow_ups:
            callback, kind = config.on_undelivered_follow_ups, "follow_up"
        else:
            callback, kind = config.on_undelivered_steering, "steering"
        self.pending_are_follow_ups = False
        if callback is None:
            self.log.warning("loop.messages.undelivered", kind=kind, count=len(pending))
            return
        callback(pending)

    def canceled(self, reason: str) -> Event:
        self.hand_back()
        self.log.info("loop.run.canceled", reason=reason, new_messages=len(self.new_messages))
        return self.stamp(Canceled, reason=reason)

    async def events(self) -> AsyncIterator[Event]:
        started = time.monotonic()
        if self.debug:
            self.log.debug("loop.run.started", prompts=len(self.prompts), history=self.history_len)
        try:
            if self.agent is not None:  # checked once, as the first event would check it
                self.agent = AgentKey.of(self.agent)
            yield self.stamp(AgentStart)
            yield self.stamp(TurnStart)
            for prompt in self.prompts:
                for event in self.commit(prompt):
                    yield event
            first_turn = True
            if self.config.resume is not None:  # a turn parked for approvals goes first
                resumed = ResumeOutcome()
                async for event in resumed_turn(self, self.config.resume, resumed):
                    yield event
                if resumed.ended:
                    return
                first_turn = False
            self.pending = self.take_steering()
            while True:
                while True:
                    if self.signal.aborted:
                        yield self.canceled(str(self.signal.reason))
                        return
                    if not first_turn:
                        yield self.stamp(TurnStart)
                        if self.signal.aborted:  # while its consumer held it (its loop turn)
                            yield self.canceled(str(self.signal.reason))
                            return
                    first_turn = False
                    for event in self.deliver_pending():
                        yield event
                    for message in self.feedback:
                        for event in self.commit(message):
                            yield event
                    self.feedback = []
                    outcome = TurnOutcome()
                    if self.config.get_system_prompt is not None:
                        self.system_prompt = self.config.get_system_prompt()
                    request, violations = await build_request(
                        self.messages(),
                        self.system_prompt,
                        self.tools,
                        self.config,
                        self.transcript,
                    )
                    if request is None:
                        reason = "invalid_transcript: " + "; ".join(violations)
                        yield self.stamp(Error, reason=reason)
                        return
                    if self.output is not None:
                        request = self.output.spec.prepare(request, self.config.model.info)
                    turn = stream_turn(
                        request,
                        self.config,
                        self.signal,
                        self.stamp,
                        outcome,
                        self.transcript,
                        guards=self.guards,
                        on_update=self.on_update,
                    )
                    async with aclosing(turn):
                        async for event in turn:
                            yield event
                    if outcome.aborted is not None:
                        yield self.canceled(outcome.aborted)
                        return
                    if outcome.error is not None or outcome.message is None:
                        self.log.warning("loop.run.failed", error=outcome.error)
                        yield self.stamp(
                            Error, reason=outcome.error or "no answer", partial=outcome.partial
                        )
                        return
                    message = outcome.message
                    if message.stop_reason in ("error", "aborted"):
                        # The provider refused or cut the answer (e.g. a content filter): like
                        # a failed attempt it is announced but not committed, and the run fails.
                        yield self.stamp(MessageEnd, message=message)
                        reason = f"provider_stopped: {message.error_message or message.stop_reason}"
                        yield self.stamp(Error, reason=reason, partial=message)
                        return
                    self.new_messages.append(message)
                    yield self.stamp(MessageEnd, message=message)
                    calls = message.tool_calls
                    step = None if self.output is None else self.output_step(message)
                    if step is not None:
                        for event in step[0]:
                            yield event
                        if step[1] == "fail":
                            return
                        if step[1] == "retry":
                            continue
                        self.pending = self.take_steering()
                        if self.pending:
                            continue
                        break
                    if not calls:
                        yield self.stamp(TurnEnd, message=message, tool_results=[])
                        self.pending = self.take_steering()
                        if self.pending:
                            continue
                        break
                    batch = ToolBatch(
                        calls,
                        self.tools,
                        self.config,
                        self.signal,
                        self.stamp,
                        self.take_steering,
                        task_context=self.trace.tool_context,
                        guards=self.guards,
                    )
                    batch_events = batch.run()
                    async with aclosing(batch_events):
                        async for event in batch_events:
                            if (edit := edited_args(event)) is not None:
                                message = self.amend(message, *edit)
                            yield event
                    self.pending = batch.outcome.steering  # taken at a boundary: deliver it next
                    results: list[ToolResultMessage] = []
                    for call, result in batch.outcome.results:
                        result_message = ToolResultMessage(
                            tool_call_id=call.id,
                            tool_name=call.name,
                            content=result.content,
                            details=result.details,
                            is_error=result.is_error,
                            trust=result.trust,
                        )
                        results.append(result_message)
                        for event in self.commit(result_message):
                            yield event
                    yield self.stamp(TurnEnd, message=message, tool_results=results)
                    if batch.outcome.tripped is not None:  # a tool result a guardrail blocked
                        yield self.stamp(Error, reason=batch.outcome.tripped)
                        return
                    if batch.outcome.aborted is not None:
                        yield self.canceled(batch.outcome.aborted)
                        return
                    self.tool_turns += 1
                    if self.tool_turns >= self.config.max_tool_turns:
                        self.hand_back()  # what the batch took; the queue keeps the rest
                        async for event in self._stop_at_turn_limit():
                            yield event
                        return
                    if not self.pending:
                        self.pending = self.take_steering()
                # An abort seen before the end wins over it; queued follow-ups stay queued.
                if self.signal.aborted:
                    yield self.canceled(str(self.signal.reason))
                    return
                follow_ups = self.take_follow_ups()
                if not follow_ups:
                    break
                self.pending, self.pending_are_follow_ups = follow_ups, True
            if self.debug:
                self.log.debug(
                    "loop.run.finished",
                    new_messages=len(self.new_messages),
                    tool_turns=self.tool_turns,
                    seconds=round(time.monotonic() - started, 4),
                )
            yield self.stamp(AgentEnd, new_messages=list(self.new_messages))
        finally:
            # Closed early (aclose, or an exception from a callback): nothing taken is lost.
            self.hand_back()
            self.trace.finish(None)

    def output_step(self, message: AssistantMessage) -> tuple[list[Event], str] | None:
        """The typed output's check of an answer: the events that end its turn and what comes
        next (`ok`: as a final answer, `retry`: another call, `fail`: the run ended), or None
        for an answer whose tool calls run as usual."""
        assert self.output is not None
        verdict, extra, reason = self.output.check(message)
        if verdict == "tools":
            return None
        events: list[Event] = []
        results = [m for m in extra if isinstance(m, ToolResultMessage)]
        for result in results:
            events.extend(self.commit(result))
        events.append(self.stamp(TurnEnd, message=message, tool_results=results))
        if verdict == "retry" and not results:
            self.feedback = list(extra)
        if verdict == "fail":
            self.log.warning("loop.run.output_invalid", reason=reason)
            events.append(self.stamp(Error, reason=reason, partial=message))
        return events, verdict

    async def _stop_at_turn_limit(self) -> AsyncIterator[Event]:
        limit = self.config.max_tool_turns
        note = AssistantMessage(
            content=[
                TextContent(
                    text=(
                        f"I stopped after {limit} rounds of tool calls (max_tool_turns={limit}). "
                        "The tool results above are complete; send a message to continue."
                    )
                )
            ],
            stop_reason="stop",
            model=self.config.model.info.model,
            provider=self.config.model.info.provider,
        )
        yield self.stamp(TurnStart)
        for event in self.commit(note):
            yield event
        yield self.stamp(TurnEnd, message=note, tool_results=[])
        self.log.warning("loop.run.tool_turn_limit", max_tool_turns=limit)
        yield self.stamp(AgentEnd, new_messages=list(self.new_messages))


_MESSAGE_TYPES = (UserMessage, AssistantMessage, ToolResultMessage)


def _checked(messages: Iterable[Any]) -> list[Message]:
    """Messages entering a run (prompts, steering, follow-ups), validated once, here: the run
    sends its transcript on without validating it again."""
    return [
        m if isinstance(m, _MESSAGE_TYPES) else MessageAdapter.validate_python(m) for m in messages
    ]


def run(
    prompts: Sequence[Message],
    context: AgentContext,
    config: LoopConfig,
    signal: AbortSignal | None = None,
) -> AsyncIterator[Event]:
    """Run the agent loop: an async generator of events ending with one terminal event.

    Every event carries `config.run_id`, or a fresh id (`new_run_id()`) when it is empty,
    so two runs never share one.
    `prompts` are appended to `context.messages` and announced; then the model is called,
    tools run, steering and follow-ups are taken, until the model stops (`AgentEnd` with the
    run's new messages), a provider error ends it (`Error`), or `signal` is aborted
    (`Canceled`). Nothing outside the generator is mutated (but `context.transcript`, which the
    run takes over): the caller keeps the transcript
    from the events (every MessageEnd except those of failed or aborted attempts, whose
    `stop_reason` is `error` or `aborted`) or from `AgentEnd.new_messages`.
    """
    return _Run(prompts, context, config, signal).events()


def run_into(
    prompts: Sequence[Message] | None,
    context: AgentContext,
    config: LoopConfig,
    signal: AbortSignal | None,
    on_update: UpdateSink,
) -> AsyncIterator[Event]:
    """`run` (or, with `prompts` None, `continue_run`) whose streamed `MessageUpdate`s go to
    `on_update` instead of being yielded: for a consumer that hands every token on anyway
    (an agent's driver), two generator layers fewer per token. Every other event, in the
    same order relative to the updates, is yielded as `run` yields it."""
    if prompts is None and config.resume is None:  # a resumed turn continues any history
        check_continuable(context)
    return _Run(prompts or [], context, config, signal, on_update).events()


def check_continuable(context: AgentContext) -> None:
    """Raise ValueError unless a run can continue from `context` (Lemon's rule)."""
    if not context.messages:
        raise ValueError("Cannot continue: no messages in context")
    last = context.messages[-1]
    if isinstance(last, AssistantMessage):
        raise ValueError("Cannot continue from message role: assistant")


def continue_run(
    context: AgentContext, config: LoopConfig, signal: AbortSignal | None = None
) -> AsyncIterator[Event]:
    """Resume a run from `context` without new prompts.

    Raises:
        ValueError: "Cannot continue: no messages in context" or "Cannot continue from
            message role: assistant".
    """
    check_continuable(context)
    return _Run([], context, config, signal).events()
