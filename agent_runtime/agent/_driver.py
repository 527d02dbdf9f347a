"""RunDriver: the one task of a run on the event loop. It iterates the stateless loop, turns
the run's events into facts for the actor, commits its turns to session memory, and fans the
events out to the subscriptions (whose backpressure paces the loop)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import Future
from typing import Any

import pykka

from agent_runtime.agent._history import pair_dangling_calls
from agent_runtime.agent._messages import answer
from agent_runtime.agent._run import RunView
from agent_runtime.agent._shell import AgentShell
from agent_runtime.agent._status import Phase, RunProgress
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
from agent_runtime.loop.types import UpdateSink
from agent_runtime.memory import SessionWriter
from agent_runtime.messages import AssistantMessage, Message
from supervisors import EventLoopDied

# How long a run's end waits for its last session-memory append (the writer logs failures).
COMMIT_WAIT = 30.0

_OUTCOMES: dict[type, str] = {AgentEnd: "completed", Error: "failed", Canceled: "canceled"}


class RunDriver:
    """Drives one run's events (on the loop thread).

    Guarantees:
    - The actor hears only committed facts: each message ended, each tool started and ended,
      and the run's end; never one per token, and batched: at each tool's start and end and
      when the run goes on after a turn (at once when a subscriber sees the run, else once
      the loop's step is over, together), and with the run's end (a text-only run is one
      message). A subscriber that sees an event after such a point finds its facts in
      `state()`, also one that subscribed in the middle of the step.
      The partial message is published on the view.
    - Each turn (an assistant message with its tool results) is appended to session memory as
      one batch when it ends, off the event loop, in order; the run's end is told and delivered
      only after its last append finished or failed (or after COMMIT_WAIT, logged, should the
      store hang: the run's end is never held for ever). A run that ends with `AgentEnd`
      carries in `memory_error` why one of its turns was not committed (or is not yet, after
      COMMIT_WAIT); the appends run on the writer's threads, so a locked store holds up no
      other agent's run.
    - The actor hears of the run's end before the end is delivered, and the run's outcome
      (`run()`) is set after the delivery: once `run()` returns, the agent takes a new prompt.
    - Events of consecutive runs reach each subscription in run order.
    - A run whose actor crashed ends with `Error("agent_crashed: ...")`; its turns from then on
      are not committed (the restarted actor reads the session as it was).
    - The run's progress (turn, phase, tools running) is published on the shell for
      `Runtime.tree()` at each event that is not a token, and the runtime's counters (runs,
      turns, tool calls, tokens, retries) are counted here, from the events.
    """

    def __init__(
        self,
        shell: AgentShell,
        view: RunView,
        loop: Callable[[UpdateSink], AsyncIterator[Event]],
        tell: Callable[..., None],
        writer: SessionWriter | None,
        started_by: pykka.ActorRef[Any],
    ) -> None:
        self.shell = shell
        self.view = view
        self.tell = tell
        self.writer = writer
        self.started_by = started_by  # the actor told of the run's end
        self.end_told = False  # the run's end went to that actor, from `_end`
        self.unit: list[Message] = []  # the turn being assembled
        self.run_messages: list[Message] = []
        self.last_write: Future[None] | None = None
        self.memory_error: str | None = None  # the first failed commit of this run
        self.terminal: Event | None = None
        self.settled = False
        self.facts: list[tuple[str, tuple[Any, ...]]] = []  # not yet told to the actor
        # A point was passed after which the actor must hear of the facts: they go before the
        # next event anyone sees, else at the end of this loop step (`_flush_point`).
        self.flush_due = False
        self.flush_scheduled = False  # that end-of-step flush is on its way
        self.turn_ended = False
        self.last_seq = 0  # of the loop's last event, for an end the driver has to make
        self.counters = shell.host.counters
        self.turn = 0
        self.phase: Phase = "starting"
        self.running_tools: dict[str, str] = {}  # call id -> tool name, in start order
        # The run's events, but its tokens: those the loop hands to `on_update` directly.
        self.events = loop(self.on_update)

    @functools.cached_property
    def log(self) -> Any:
        """The driver's logger, bound on first use (a run that goes well logs nothing at the
        default level)."""
        return self.shell.log.bind(run_id=self.view.run_id)

    async def drive(self) -> None:
        shell = self.shell
        me = asyncio.current_task()
        previous, shell.last_driver = shell.last_driver, me
        try:
            # (A driver left on an event loop that died never finishes: not waited for.)
            if previous is not None and not previous.done() and not previous.get_loop().is_closed():
                await asyncio.wait([previous])
            events = self.events
            while self.terminal is None:
                try:  # `anext` itself, not a coroutine of ours around it: once per event
                    event = await anext(events)
                except Exception as exc:  # StopAsyncIteration too: the loop ended early
                    event = self._loop_failed(exc)
                terminal = is_terminal(event)
                if terminal:
                    event = await self._end(event)  # a terminal still
                else:
                    if self.turn_ended:  # the run goes on after a turn: the actor hears of it
                        self._flush_point()
                    self.last_seq = event.seq
                    self._apply(event)
                behind = self._hand_out(event, terminal)
                if behind is not None:  # a `block` reader is behind: wait for it (backpressure)
                    await behind
        except asyncio.CancelledError:
            if self.terminal is None:
                self._stopped_mid_run()
            raise
        except Exception as exc:  # a bug here: the actor must not go on as if nothing happened
            self.log.exception("agent.driver.failed")
            reason = f"agent_crashed: driver: {type(exc).__name__}: {exc}"
            self.view.signal.abort(reason)  # the run stops: nobody applies its events now
            self.tell("driver_failed", f"{type(exc).__name__}: {exc}")
            if self.terminal is None:
                self.terminal = Error(agent=shell.key, run_id=self.view.run_id, reason=reason)
                shell.push_now(self.terminal)
        finally:
            await aclose_quietly(self.events)  # the loop's own cleanup (hand-backs, spans)
            self._settle()
            # (Not asking asyncio: a driver closed by the collector has no running loop.)
            if shell.last_driver is me:  # nothing left to wait for, and an idle agent
                shell.last_driver = None  # keeps no finished task

    def on_update(self, event: MessageUpdate) -> Awaitable[None] | None:
        """A streamed token of the run, handed over by the loop in place of yielding it (what
        `drive` does with an event, for the one kind there is most of)."""
        if self.turn_ended:
            self._flush_point()
        self.last_seq = event.seq
        self.view.stream_event = event
        return self._hand_out(event, False)

    def _hand_out(self, event: Event, terminal: bool) -> Awaitable[None] | None:
        """Give `event` to the run's subscribers and a delegating parent, if any, the facts
        due to the actor first (so a reader finds them in `state()`); what to await when a
        `block` reader is behind, else None."""
        shell = self.shell
        if not shell.subscriptions and shell.parent is None:
            return None  # nobody to hand it to
        if self.flush_due:
            self._flush()
        full = shell.fan_out_now(event, terminal)
        return shell.fan_out_rest(full, event) if full else None

    def _loop_failed(self, exc: Exception) -> Event:
        """The event that ends a run whose loop failed or ended without a terminal:
        `Error("loop_crashed: ...")` (the agent goes on)."""
        if isinstance(exc, StopAsyncIteration):
            reason = "loop_crashed: the run ended without a terminal event"
        else:  # a bug in the loop or in a callback of its config
            self.log.error("loop.crashed", exc_info=exc)
            reason = f"loop_crashed: {type(exc).__name__}: {exc}"
        return Error(
            agent=self.shell.key, run_id=self.view.run_id, seq=self.last_seq + 1, reason=reason
        )

    def done(self, cancelled: bool, error: BaseException | None) -> None:
        """The driver's task ended (`AsyncTaskSupervisor.spawn`); one cancelled before it
        ran still settles the run, and one whose event loop died under it ends the run with
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
            dangling = pair_dangling_calls(self.run_messages, reason)
            self.unit.extend(dangling)
            self._commit()
            self.terminal = Error(
                agent=self.shell.key, run_id=self.view.run_id, seq=self.last_seq + 1, reason=reason
            )
            self.facts.append(("run_ended", (self.terminal, dangling)))
            self._flush()
            self.shell.push_now(self.terminal)
            self.view.signal.abort(reason)  # for its sync tools still running in their threads
        self._settle()

    def _apply(self, event: Event) -> None:
        view = self.view
        if isinstance(event, MessageUpdate):
            view.stream_event = event
        elif isinstance(event, MessageStart):
            if isinstance(event.message, AssistantMessage):
                view.stream_event = event
                self._progress("streaming")
        elif isinstance(event, MessageEnd):
            view.stream_event = None
            message = event.message
            if isinstance(message, AssistantMessage):
                self.counters.tokens_used(message.usage.input_tokens, message.usage.output_tokens)
                self._progress("running")
            failed = isinstance(message, AssistantMessage) and message.stop_reason in (
                "error",
                "aborted",
            )
            if not failed:
                self.unit.append(message)
                self.run_messages.append(message)
                self.facts.append(("message_committed", (message,)))
        elif isinstance(event, ToolExecutionStart):
            self.running_tools[event.tool_call_id] = event.name
            self._progress()
            self.facts.append(("tool_started", (event.tool_call_id,)))
            self._flush_point()  # a tool may run for long: state() shows it soon
        elif isinstance(event, ToolExecutionEnd):
            self.running_tools.pop(event.tool_call_id, None)
            self._progress()
            self.counters.tool_ended(event.is_error, event.result.details)
            self.facts.append(("tool_ended", (event.tool_call_id,)))
            self._flush_point()
        elif isinstance(event, TurnEnd):
            self._commit()
            self.turn_ended = True
        elif isinstance(event, TurnStart):
            self.turn += 1
            self.counters.turn_started()
            self._progress("waiting")
        elif isinstance(event, ProviderRetry):
            self.counters.retry_scheduled()
            self._progress("retrying")
        elif isinstance(event, AgentStart):
            self._progress("starting")

    def _progress(self, phase: Phase | None = None) -> None:
        """Publish the run's progress (one reference swap; never per token)."""
        if phase is not None:
            self.phase = phase
        self.shell.progress = RunProgress(
            self.view.run_id, self.turn, self.phase, tuple(self.running_tools.values())
        )

    def _flush(self) -> None:
        """Tell the actor the facts gathered since the last flush, in one message: a thread
        hop costs far more than a fact, so they travel together."""
        self.turn_ended = self.flush_due = False
        if self.facts:
            facts, self.facts = self.facts, []
            self.tell("facts", self.view.run_id, facts)

    def _flush_point(self) -> None:
        """The actor must hear of the facts so far: before the next event that a subscriber
        (or a delegating parent's) sees, so its reader finds them in `state()`, else once
        this step of the loop is over, with the step's other facts: a tool call's start, its
        end and the next turn's start then cost the actor one wake-up, not three."""
        self.turn_ended = False
        self.flush_due = True
        if not self.flush_scheduled:
            self.flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self.flush_scheduled = False
        if self.flush_due:  # (not once a subscriber's event or the run's end took them)
            self._flush()

    def _commit(self) -> None:
        unit, self.unit = self.unit, []
        if unit and self.writer is not None and self.view.crashed is None:
            self.last_write = self.writer.append(self.shell.key.session, unit)
            self.last_write.add_done_callback(self._committed)

    def _committed(self, write: Future[None]) -> None:
        """On a writer thread, before the run's end can see this write done (this callback is
        added before the end's await): remember the run's first failed commit."""
        error = write.exception()
        if error is not None and self.memory_error is None:
            self.memory_error = f"{type(error).__name__}: {error}"

    async def _end(self, terminal: Event) -> Event:
        view = self.view
        if view.crashed is not None:
            terminal = Error(
                agent=self.shell.key,
                run_id=view.run_id,
                seq=terminal.seq,
                reason=f"agent_crashed: {view.crashed}",
            )
        reason = terminal.reason if isinstance(terminal, Canceled | Error) else "ended"
        dangling = pair_dangling_calls(self.run_messages, reason)
        self.unit.extend(dangling)
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
        if self.memory_error is not None and isinstance(terminal, AgentEnd):
            terminal = terminal.model_copy(update={"memory_error": self.memory_error})
        self.terminal = terminal
        self.running_tools.clear()
        self._progress("ending")
        self.facts.append(("run_ended", (terminal, dangling)))
        self._flush()
        self.end_told = True
        return terminal

    def _stopped_mid_run(self) -> None:
        """The stopping runtime cancelled this driver: end the run without waiting."""
        self.terminal = Canceled(
            agent=self.shell.key, run_id=self.view.run_id, reason="runtime_stopped"
        )
        self.facts.append(("run_ended", (self.terminal, [])))
        self._flush()
        self.shell.push_now(self.terminal)

    def _settle(self) -> None:
        view = self.view
        if self.settled:
            return
        self.settled = True
        terminal = self.terminal or Canceled(
            agent=self.shell.key, run_id=view.run_id, reason="lost"
        )
        answer(view.ended, result=terminal)  # the actor may be gone and never hear of the end
        self.counters.run_ended(_OUTCOMES.get(type(terminal), "canceled"))
        if self.shell.run_delivered(view):
            self.shell.close_subscriptions()
        elif self.end_told and view.crashed is None:
            self.shell.offer_start_after(view, self.started_by)  # before run() returns
        answer(view.outcome, result=terminal)
        self.shell.host.abort_table.release(view.signal)
        # The agent's own logger with the run id as a field: the same line, and no logger
        # bound per run to drop it at the default level.
        self.shell.log.info(
            "agent.run.finished", run_id=view.run_id, outcome=type(terminal).__name__
        )
