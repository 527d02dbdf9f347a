"""AgentRun: one run of an agent, a task on the agent's event loop that owns what is in flight.

The run iterates the stateless loop, hands its events to the subscriptions (whose
backpressure paces it), commits its turns to session memory, and talks to its actor, which
lives on the same loop, only by messages (`_protocol`): the facts it reports are `tell`s;
the steering and follow-ups it delivers are in its own queues (`RunQueues`), which the
actor pushes into; what it must have handled before it goes on (that it would end, the
merged history at its start) is handled at once by the actor (`handle_now`), after
whatever the actor's mailbox held before (mailbox order).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import Future
from typing import Any

import pykka

from agent_runtime.abort import AbortSignal
from agent_runtime.agent._approvals import RunApprovals
from agent_runtime.agent._cell import AgentCell
from agent_runtime.agent._history import RunTranscript
from agent_runtime.agent._loop_share import loop_share
from agent_runtime.agent._protocol import (
    Amended,
    CarriedStored,
    CommitFailed,
    Committed,
    MergeSession,
    ModeChanged,
    PromptRendered,
    Pushed,
    Queued,
    QueueKind,
    QueuesChanged,
    Requeue,
    RunBroke,
    RunEnded,
    ToolEnded,
    ToolStarted,
    WouldEnd,
)
from agent_runtime.agent._run_queues import RunQueues
from agent_runtime.agent._status import Phase, RunProgress
from agent_runtime.agent._storage import forget_prompt, prepare_run
from agent_runtime.events import (
    AgentEnd,
    AgentStart,
    Canceled,
    Error,
    Event,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ProviderRetry,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
    is_terminal,
)
from agent_runtime.llm._abortable import aclose_quietly
from agent_runtime.loop import AgentContext, LoopConfig
from agent_runtime.loop._approval import edited_args
from agent_runtime.loop._instruments import LOOP_WAIT
from agent_runtime.loop._run import run_into
from agent_runtime.loop._transcript import TranscriptState
from agent_runtime.messages import AssistantMessage, Message
from agent_runtime.telemetry import telemetry_enabled
from agent_runtime.templates import Template, TemplateError
from agent_runtime.tools import Tool
from supervisors import AsyncioActor, EventLoopDied, LoopFuture

# How long a run's end waits for its last session-memory append (the writer logs failures).
COMMIT_WAIT = 30.0

_OUTCOMES: dict[type, str] = {AgentEnd: "completed", Error: "failed", Canceled: "canceled"}


class AgentRun:
    """One run, driven by one task on the agent's loop.

    Guarantees:
    - Before its first model call, the run's storage work is done off the loop, in its
      session's order (one hop to the session writer): its prompt is kept in session state
      (a prompt accepted is kept: a crash then a restart, or a new process, finds it at the
      end of the agent's history), what the session's other agents committed since is read
      and merged into the actor's history, and a `Template` system prompt is rendered.
    - The actor hears of every message that enters the transcript, every tool's start and
      end and the run's end, each before any subscriber sees the event that follows it
      (so a reader finds it in `state()`); never one fact per token.
    - Each turn (an assistant message with its tool results) is appended to session memory as
      one batch when it ends, off the loop, in order; the run's end is told and delivered
      only after its last append finished or failed (or after COMMIT_WAIT, logged). A run
      that ends with `AgentEnd` carries in `memory_error` why one of its turns was not
      committed.
    - The actor hears of the run's end before the end is delivered, and the run's outcome
      (`run()`) is set after the delivery: once `run()` returns, the agent takes a new prompt.
    - A run whose actor crashed ends with `Error("agent_crashed: ...")`; its turns from then on
      are not committed (the restarted actor reads the session as it was).
    - The run's progress (turn, phase, tools running) is published on the cell for
      `Runtime.tree()` at each event that is not a token, and the runtime's counters are
      counted here, from the events.
    """

    def __init__(
        self,
        cell: AgentCell,
        actor: AsyncioActor,
        run_id: str,
        signal: AbortSignal,
        outcome: LoopFuture[Event],
        prompts: tuple[Message, ...] | None,
        history: tuple[Message, ...],
        transcript: TranscriptState,
        system_prompt: str | Template,
        tools: Sequence[Tool],
        config: LoopConfig,
        config_update: dict[str, Any],
        since: int | None,
        queues: RunQueues,
        parked: Any = None,
        carried: tuple[Message, ...] = (),
        reset_at: Future[int] | None = None,
    ) -> None:
        self.cell = cell
        self.actor = actor
        self.run_id = run_id
        self.signal = signal
        self.outcome = outcome
        self.prompts = prompts
        self.history = history
        self.transcript_state = transcript
        self.system_prompt = system_prompt
        self.tools = tools
        self.config = config  # the agent's settings; `config_update` holds the run's values
        self.config_update = config_update
        self.since = since  # the session sequence the actor's history reflects (None: no read)
        self.reset_at = reset_at  # after a reset: where it left the session (a writer's read)
        self.queues = queues  # steering and follow-ups to deliver, pushed by the actor
        self.writer = cell.host.memory_writer if cell.options.memory.write else None
        # The history's kept prompt of a crashed incarnation, not in session memory yet: it
        # goes to memory first in the run's first batch (its place in the history), and its
        # kept copy is dropped with the run's own prompt.
        self.carried = carried if self.writer is not None else ()
        self.transcript = RunTranscript(self.carried)
        self.keeps_prompt = self.writer is not None and bool(prompts or self.carried)
        self.last_write: Future[Any] | None = None
        self.memory_error: str | None = None  # the first failed commit of this run
        self.terminal: Event | None = None
        self.settled = False
        self.crashed: str | None = None  # the actor crashed during the run
        self.start_error: BaseException | None = None  # why it ended before its loop began
        # The latest MessageStart/MessageUpdate of the answer streaming now (its message is
        # made only when someone asks: state()).
        self.stream_event: MessageStart | MessageUpdate | None = None
        # Or, while its tokens go unheard, the answer as it grows (the loop makes no events).
        self.stream_live: Callable[[], AssistantMessage] | None = None
        self.taken: dict[int, Queued] = {}  # taken by id(message), for what comes back
        self.last_seq = 0  # of the loop's last event, for an end the run has to make
        self.counters = cell.host.counters
        self.turn = 0
        self.phase: Phase = "starting"
        self.running_tools: dict[str, str] = {}  # call id -> tool name, in start order
        # Its calls waiting for approval (and the turn `parked` by an earlier incarnation,
        # resumed before the first model call).
        self.approvals = RunApprovals(self, cell.key, self.writer, self.transcript, parked)

    @functools.cached_property
    def log(self) -> Any:
        """The run's logger, bound on first use (a run that goes well logs nothing at the
        default level)."""
        return self.cell.log.bind(run_id=self.run_id)

    @property
    def stream_message(self) -> AssistantMessage | None:
        """The answer streaming now, as far as it got."""
        live = self.stream_live
        if live is not None:
            return live()
        event = self.stream_event
        message = event.message if event is not None else None
        return message if isinstance(message, AssistantMessage) else None

    def crash(self, reason: str) -> None:
        """The agent's actor crashed: end the run with `Error("agent_crashed: ...")`."""
        self.crashed = reason
        self.signal.abort(f"agent_crashed: {reason}")

    # -- messages to the actor --------------------------------------------------------------------

    def _tell(self, message: Any) -> None:
        if self.crashed is None:
            with contextlib.suppress(pykka.ActorDeadError):
                self.actor.actor_ref.tell(message)

    def _ask_now(self, message: Any) -> Any:
        """The actor's answer, at once (the actor lives on this loop); None if it is gone."""
        if self.crashed is not None:
            return None
        try:
            return self.actor.handle_now(message)
        except pykka.ActorDeadError:
            return None

    def deliver(self, message: Pushed | ModeChanged) -> bool:
        """A push from the actor into the run's queues; False once the run has handed back
        what it did not deliver (the actor keeps the message)."""
        return self.queues.deliver(message)

    def queued(self, kind: QueueKind) -> tuple[Queued, ...]:
        """What the run's queue of `kind` holds, not delivered yet (for `state()`)."""
        return self.queues.queued(kind)

    def _take(self, kind: QueueKind) -> list[Message]:
        taken = self.queues.take(kind)
        if not taken:
            return []
        for item in taken:
            self.taken[id(item.message)] = item
            if item.system_prompt is not None:
                self.system_prompt = item.system_prompt
        self._tell(QueuesChanged(self.run_id))
        return [item.message for item in taken]

    def take_steering(self) -> list[Message]:
        """For `LoopConfig.get_steering_messages`: from the run's own queue, no hop."""
        return self._take("steering")

    def take_follow_ups(self) -> list[Message]:
        """For `LoopConfig.get_follow_up_messages`. With none queued the run would end: the
        actor first handles what its mailbox holds (a follow-up in it is pushed here), and
        the run ends only if it still has none then."""
        taken = self._take("follow_up")
        if taken or self.crashed is not None:
            return taken
        self._ask_now(WouldEnd(self.run_id))
        return self._take("follow_up")

    def _requeue(self, kind: QueueKind, messages: list[Message]) -> None:
        queued = tuple(self.taken.pop(id(m), Queued(m)) for m in messages)
        if self.queues.requeue(kind, queued):
            self._tell(QueuesChanged(self.run_id))
        else:  # the run's end handed its queues back already: the actor takes these too
            self._tell(Requeue(self.run_id, kind, queued))

    def _ended(self, terminal: Event, dangling: tuple[Message, ...]) -> None:
        """Tell the actor the run's end, with what its queues did not deliver."""
        steering, follow_ups = self.queues.close()
        self._tell(RunEnded(self.run_id, terminal, dangling, steering, follow_ups))

    def current_system_prompt(self) -> str:
        """For `LoopConfig.get_system_prompt`."""
        prompt = self.system_prompt
        return prompt if isinstance(prompt, str) else ""

    def set_system_prompt(self, prompt: str) -> None:
        """The agent's system prompt changed mid-run: it applies from the next model call."""
        self.system_prompt = prompt

    # -- the run ----------------------------------------------------------------------------------

    async def drive(self) -> None:
        cell = self.cell
        me = asyncio.current_task()
        previous, cell.last_task = cell.last_task, me
        events: AsyncIterator[Event] | None = None
        try:
            # The previous run's end first: each subscription gets runs in order. (A run
            # left on an event loop that died never finishes: not waited for.)
            if previous is not None and not previous.done() and not previous.get_loop().is_closed():
                await asyncio.wait([previous])
            context = await self._prepare()
            if context is None:  # ended before its loop began (aborted, or its prompt failed)
                return
            # The loop's start up to its first model call is a heavy step: its turn first.
            share = loop_share(asyncio.get_running_loop())
            turn = share.admit(self.signal)
            if turn is not None:
                await self._wait_turn(turn)
            events = run_into(
                list(self.prompts) if self.prompts is not None else None,
                context,
                self._loop_config(),
                self.signal,
                self,
            )
            while self.terminal is None:
                try:  # `anext` itself, not a coroutine of ours around it: once per event
                    event = await anext(events)
                except Exception as exc:  # StopAsyncIteration too: the loop ended early
                    event = self._loop_failed(exc)
                terminal = is_terminal(event)
                if terminal:
                    event = await self._end(event)  # a terminal still
                else:
                    self.last_seq = event.seq
                    self._apply(event)
                behind = self._hand_out(event, terminal)
                if behind is not None:  # a `block` reader is behind: wait for it (backpressure),
                    await behind  # until an abort
                if self.turn > 1 and type(event) is TurnStart:  # a model call is next
                    turn = share.admit(self.signal)
                    if turn is not None:
                        await self._wait_turn(turn)
        except asyncio.CancelledError:
            if self.terminal is None:
                self._stopped_mid_run()
            raise
        except Exception as exc:  # a bug here: the actor must not go on as if nothing happened
            self.log.exception("agent.run.failed")
            reason = f"agent_crashed: run: {type(exc).__name__}: {exc}"
            self.signal.abort(reason)
            self._tell(RunBroke(f"{type(exc).__name__}: {exc}"))
            if self.terminal is None:
                self.terminal = Error(agent=cell.key, run_id=self.run_id, reason=reason)
                cell.push_now(self.terminal)
        finally:
            if events is not None:
                await aclose_quietly(events)  # the loop's own cleanup (hand-backs, spans)
            self._settle()
            if cell.last_task is me:  # an idle agent keeps no finished task
                cell.last_task = None

    async def _wait_turn(self, turn: asyncio.Future[None]) -> None:
        """Wait for `turn`, the run's turn of the loop that its share gave, and count the
        wait (`RuntimeStats.loop_waits`, the `agent_runtime.loop.wait` histogram)."""
        began = time.perf_counter()
        try:
            await turn
        finally:
            seconds = time.perf_counter() - began
            self.counters.loop_waited(seconds)
            if telemetry_enabled():
                LOOP_WAIT.record(seconds)

    async def _prepare(self) -> AgentContext | None:
        """The run's storage work, off the loop, then the context its loop starts from; None
        when the run ended here (its terminal delivered)."""
        cell = self.cell
        writer, since = cell.host.memory_writer, self.since
        # Kept until the first batch commits: the run's prompt, after the one it carries.
        keep = [*self.carried, *self.prompts] if self.keeps_prompt and self.prompts else None
        template = self.system_prompt if isinstance(self.system_prompt, Template) else None
        history = self.history
        if keep or since is not None or template is not None:
            work = functools.partial(
                prepare_run, writer.memory, cell.key, keep, since, template, self.reset_at
            )
            try:
                rendered, changes, reset_point = await asyncio.wrap_future(
                    writer.submit(cell.key.session, work)
                )
            except Exception as exc:
                if not isinstance(exc, TemplateError):  # the store failed
                    error = f"{type(exc).__name__}: {exc}"
                    self.log.warning("agent.memory.read_failed", error=error)
                if template is not None:  # no system prompt to run with: the start fails
                    self.start_error = exc
                    reason = f"template: {type(exc).__name__}: {exc}"
                    await self._end_early(Error(agent=cell.key, run_id=self.run_id, reason=reason))
                    return None
                rendered, changes, reset_point = None, None, None  # on the agent's own history
            if rendered is not None:
                self.system_prompt = rendered
                self._tell(PromptRendered(rendered))
            if changes is not None:
                merged = self._ask_now(MergeSession(self.run_id, changes, reset_point))
                if merged is not None:
                    history, self.transcript_state = merged
        # Aborted by now, the run still goes into its loop, which commits the prompt before
        # it looks at the signal: a prompt accepted is kept (and its kept copy forgotten).
        return AgentContext.model_construct(
            system_prompt=self.current_system_prompt(),
            messages=history,  # the actor's snapshot, a tuple: the loop takes it as it is
            tools=self.tools,
            transcript=self.transcript_state,
        )

    def _loop_config(self) -> LoopConfig:
        return self.config.model_copy(
            update={
                **self.config_update,
                "get_steering_messages": self.take_steering,
                "get_follow_up_messages": self.take_follow_ups,
                "on_undelivered_steering": functools.partial(self._requeue, "steering"),
                "on_undelivered_follow_ups": functools.partial(self._requeue, "follow_up"),
                "get_system_prompt": self.current_system_prompt,
                "approvals": self.approvals,
                "resume": self.approvals.resume,
            }
        )

    async def _end_early(self, terminal: Event) -> None:
        """End a run whose loop never began: its prompt was not delivered, so it goes back."""
        self.terminal = terminal
        self._ended(terminal, ())
        behind = self._hand_out(terminal, True)
        if behind is not None:
            await behind

    # -- the loop's UpdateSink: streamed tokens, handed over in place of being yielded ----------

    def heard(self) -> bool:
        return self.cell.listened()

    def update(self, event: MessageUpdate) -> Awaitable[None] | None:
        self.last_seq = event.seq
        self.stream_event, self.stream_live = event, None
        return self.cell.hand_out_token(event, self.signal)

    def unheard(self, answer: Callable[[], AssistantMessage]) -> None:
        self.stream_event, self.stream_live = None, answer

    def _hand_out(self, event: Event, terminal: bool) -> Awaitable[None] | None:
        """Give `event` to the run's subscribers and a delegating parent's; what to await
        when a `block` reader is behind, else None."""
        cell = self.cell
        if not cell.listened():
            return None  # nobody to hand it to
        full = cell.fan_out_now(event, terminal)
        return cell.fan_out_rest(full, event, self.signal) if full else None

    def _loop_failed(self, exc: Exception) -> Event:
        """The event that ends a run whose loop failed or ended without a terminal:
        `Error("loop_crashed: ...")` (the agent goes on)."""
        if isinstance(exc, StopAsyncIteration):
            reason = "loop_crashed: the run ended without a terminal event"
        else:  # a bug in the loop or in a callback of its config
            self.log.error("loop.crashed", exc_info=exc)
            reason = f"loop_crashed: {type(exc).__name__}: {exc}"
        return Error(agent=self.cell.key, run_id=self.run_id, seq=self.last_seq + 1, reason=reason)

    def done(self, cancelled: bool, error: BaseException | None) -> None:
        """The run's task ended (`AsyncTaskSupervisor.spawn`); one cancelled before it ran
        still settles the run, and one whose event loop died under it ends the run with
        `Error("loop_crashed: ...")`."""
        if cancelled:
            if self.terminal is None:
                self._stopped_mid_run()
                self._settle()
        elif isinstance(error, EventLoopDied):
            self._lost_loop(error)

    def _lost_loop(self, error: EventLoopDied) -> None:
        """End the run now, from the dying loop's thread: none of its tasks runs again."""
        if self.terminal is None:
            reason = f"loop_crashed: {error}"
            dangling = self.transcript.dangling(reason)
            self._commit()
            self.terminal = Error(
                agent=self.cell.key, run_id=self.run_id, seq=self.last_seq + 1, reason=reason
            )
            self._ended(self.terminal, tuple(dangling))
            self.cell.push_now(self.terminal)
            self.signal.abort(reason)  # for its sync tools still running in their threads
        self._settle()

    def _apply(self, event: Event) -> None:
        if isinstance(event, MessageUpdate):
            self.stream_event, self.stream_live = event, None
        elif isinstance(event, MessageStart):
            if isinstance(event.message, AssistantMessage):
                self.stream_event, self.stream_live = event, None
                self._progress("streaming")
        elif isinstance(event, MessageEnd):
            self.stream_event = self.stream_live = None
            message = event.message
            if isinstance(message, AssistantMessage):
                self.counters.tokens_used(message.usage.input_tokens, message.usage.output_tokens)
                self._progress("running")
            if self.transcript.ended(message):
                self._tell(Committed(self.run_id, (message,)))
        elif isinstance(event, ToolExecutionStart):
            self.running_tools[event.tool_call_id] = event.name
            self.approvals.tool_started(event.tool_call_id)
            self._progress()
            self._tell(ToolStarted(self.run_id, event.tool_call_id))
        elif isinstance(event, ToolExecutionEnd):
            self.running_tools.pop(event.tool_call_id, None)
            self.approvals.tool_ended(event.tool_call_id, event.result)
            self._progress()
            self.counters.tool_ended(event.is_error, event.result.details)
            self._tell(ToolEnded(self.run_id, event.tool_call_id))
        elif isinstance(event, TurnEnd):
            self._commit()
        elif isinstance(event, TurnStart):
            self.turn += 1
            self.counters.turn_started()
            self._progress("waiting")
        elif isinstance(event, ProviderRetry):
            self.counters.retry_scheduled()
            self._progress("retrying")
        elif isinstance(event, AgentStart):
            self._progress("starting")
        elif (edit := edited_args(event)) is not None:
            amended = self.transcript.amend(*edit)  # before the turn's commit
            if amended is not None:
                self._tell(Amended(self.run_id, *amended))

    def _progress(self, phase: Phase | None = None) -> None:
        """Publish the run's progress (one reference swap; never per token)."""
        if phase is not None:
            self.phase = phase
        self.cell.progress = RunProgress(
            self.run_id, self.turn, self.phase, tuple(self.running_tools.values())
        )

    def _commit(self) -> None:
        unit = self.transcript.turn_ended()
        writer = self.writer
        if not unit or writer is None or self.crashed is not None:
            return
        session = self.cell.key.session
        self.last_write = writer.append(session, unit)
        self.last_write.add_done_callback(functools.partial(self._committed, tuple(unit)))
        if self.carried:  # this first batch began with them
            self.carried = ()
            self._tell(CarriedStored(self.run_id))
        self.approvals.turn_committed()  # after the turn's append: forget its kept wait
        if self.keeps_prompt:  # the prompt is in this first batch: stored with its turn
            self.keeps_prompt = False
            self.last_write = writer.submit(
                session, functools.partial(forget_prompt, writer.memory, self.cell.key)
            )

    def _committed(self, unit: tuple[Message, ...], write: Future[Any]) -> None:
        """On a writer thread, before the run's end can see this write done (this callback is
        added before the end's await): remember the run's first failed commit, and tell the
        actor which messages will never be in the store (before any later read of it: the
        session writer reads after this write)."""
        error = write.exception()
        if error is None:
            return
        if self.memory_error is None:
            self.memory_error = f"{type(error).__name__}: {error}"
        self._tell(CommitFailed(self.run_id, unit))

    async def _end(self, terminal: Event) -> Event:
        if self.crashed is not None:
            terminal = Error(
                agent=self.cell.key,
                run_id=self.run_id,
                seq=terminal.seq,
                reason=f"agent_crashed: {self.crashed}",
            )
        reason = terminal.reason if isinstance(terminal, Canceled | Error) else "ended"
        dangling = self.transcript.dangling(reason)
        self._commit()
        if self.last_write is not None:
            try:
                await asyncio.wait_for(asyncio.wrap_future(self.last_write), COMMIT_WAIT)
            except TimeoutError:
                self.log.warning("agent.memory.commit_slow", waited=COMMIT_WAIT)
                self.memory_error = self.memory_error or (
                    f"the commit to session memory did not finish within {COMMIT_WAIT:g}s"
                )
            except Exception:
                pass  # the writer logged it and _committed noted it; the run's result stands
            # A done concurrent future keeps its callbacks: held here, `_committed` would
            # make the run a reference cycle (see RunApprovals.run).
            self.last_write = None
        if self.memory_error is not None and isinstance(terminal, AgentEnd):
            terminal = terminal.model_copy(update={"memory_error": self.memory_error})
        self.terminal = terminal
        self.running_tools.clear()
        self._progress("ending")
        self._ended(terminal, tuple(dangling))
        return terminal

    def _stopped_mid_run(self) -> None:
        """The stopping runtime cancelled this run: end it without waiting, with the reason
        it was aborted for (the runtime's stop aborts every run first), after its last event."""
        reason = str(self.signal.reason) if self.signal.aborted else "runtime_stopping"
        self.terminal = Canceled(
            agent=self.cell.key, run_id=self.run_id, seq=self.last_seq + 1, reason=reason
        )
        self._ended(self.terminal, ())
        self.cell.push_now(self.terminal)

    def _settle(self) -> None:
        if self.settled:
            return
        self.settled = True
        cell = self.cell
        terminal = self.terminal or Canceled(agent=cell.key, run_id=self.run_id, reason="lost")
        self.counters.run_ended(_OUTCOMES.get(type(terminal), "canceled"))
        cell.on_loop(functools.partial(cell.run_delivered, self))
        if not self.outcome.settled:
            if self.start_error is not None:  # run() raises why it could not start
                error = self.start_error
                self.outcome.set_exception((type(error), error, error.__traceback__))
            else:
                self.outcome.set(terminal)
        cell.host.abort_table.release(self.signal)
        # The agent's own logger with the run id as a field: the same line, and no logger
        # bound per run to drop it at the default level.
        cell.log.info("agent.run.finished", run_id=self.run_id, outcome=type(terminal).__name__)
