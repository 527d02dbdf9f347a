"""AgentActor: the pykka actor that owns one agent's state and changes it only by messages."""

from __future__ import annotations

import contextlib
import math
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pykka

from agent_runtime._errors import AgentBusy, AgentRuntimeError, AgentStopped, CannotContinue
from agent_runtime._key import AgentKey
from agent_runtime._run_ids import new_run_id
from agent_runtime.agent._history import repaired
from agent_runtime.agent._launch import launch_run
from agent_runtime.agent._messages import Call, Fact, answer
from agent_runtime.agent._run import Queued, ReservedRun, RunInbox, RunView, take_all
from agent_runtime.agent._session_sync import SessionMirror
from agent_runtime.agent._shell import AgentShell
from agent_runtime.agent._status import ActorStatus
from agent_runtime.config import QueueMode
from agent_runtime.event_stream import Subscription
from agent_runtime.events import AgentEnd, Error, Event
from agent_runtime.llm.base import ChatModel
from agent_runtime.loop import AgentContext, TranscriptState
from agent_runtime.memory import window
from agent_runtime.messages import AssistantMessage, Message
from agent_runtime.templates import PromptTemplates, Template, TemplateError
from agent_runtime.tools import Tool, merge_tools
from supervisors import SupervisedActor

# How long a restarted agent waits for its session's pending appends before reading it.
RESTART_FLUSH = 10.0
MERGE_FLUSH = 2.0  # seconds a run start waits for its own writes after a compaction

# Test hook: called with (agent key, what, thread id) after every message that may change an
# agent's state, on the thread that changed it; an exception it raises crashes that actor.
mutation_hook: Callable[[AgentKey, str, int], None] | None = None


@dataclass
class ActiveRun:
    """The actor's record of its running run."""

    view: RunView
    pending_tool_calls: dict[str, None] = field(default_factory=dict)


class AgentActor(SupervisedActor):
    """The agent's state, owned by this actor's thread: history, queues, modes, system prompt,
    model, tools, the running run and the subscriptions.

    Guarantees:
    - Only this actor's thread changes the state; every `Agent` call is a message (`Call`),
      every committed fact of a run (message ended, tool started or ended, the run's end) is a
      message (`Fact`) from its driver on the event loop, a fixed few per turn.
    - No handler waits on the event loop or on another agent: runs are submitted, never awaited.
    - An exception a handler does not expect (anything but the `AgentRuntimeError`s it raises
      on purpose, which go back to the caller) is returned to the caller and crashes the actor:
      the supervisor sees an abnormal exit with that reason, the registry entry goes, and the
      run it had is ended with `Error("agent_crashed: ...")`. A run that fails to start is
      undone first, so nothing waits for its end (a subscription closes with the agent). A
      start reserved with the idle agent's ticket (`AgentShell.reserve_start`) was not waited
      for: its failure reaches the caller as the run's outcome and as
      `Canceled("not_started: ...")` to its subscribers.
    - On start the history is the session's (within the memory policy's window; empty when the
      policy does not read), with calls left unpaired answered `outcome="unknown"`. At each
      run's start, what the session's other agents committed since is merged in, in commit
      order (`SessionMirror`); the agent's own messages are never doubled.
    """

    def __init__(self, shell: AgentShell) -> None:
        super().__init__()
        self.shell = shell
        self.key = shell.key
        self.host = shell.host
        options = shell.options
        self.system_prompt = options.system_prompt
        self.model: ChatModel = options.model
        self.tools: list[Tool] = list(options.tools)
        self.steering_mode: QueueMode = options.steering_mode
        self.follow_up_mode: QueueMode = options.follow_up_mode
        self.messages: list[Message] = []
        self.transcript = TranscriptState()  # the incremental check of `messages`
        self.steering: deque[Queued] = deque()
        self.follow_ups: deque[Queued] = deque()
        self.error: str | None = None
        self.run: ActiveRun | None = None
        self.ended_ok_at = -math.inf  # when the last run ended with AgentEnd
        self.mirror: SessionMirror | None = None  # with a policy that reads the session
        self.log = shell.log

    # -- lifecycle (the actor's thread) -----------------------------------------------------------

    def on_start(self) -> None:
        self._owned = True  # from here on, only this thread changes the state
        shell = self.shell
        self.messages = self._remembered(restarted=shell.ref is not None)
        self.transcript.feed(self.messages)
        shell.attach(self.actor_ref)
        self.host.registry.register(
            self.key,
            shell.handle,
            ref=self.actor_ref,
            metadata={"model": self.model.info.model, "restart": shell.options.restart},
        )
        self._publish_status()
        self._offer_start()

    def on_stop(self) -> None:
        self.shell.withdraw_start()
        if self.run is not None:
            self.run.view.signal.abort("agent_stopped")

    def _remembered(self, *, restarted: bool) -> list[Message]:
        policy = self.shell.options.memory
        if not policy.read:
            return []
        if restarted and not self.host.memory_writer.flush(RESTART_FLUSH, session=self.key.session):
            # read what the previous incarnation's runs committed, as far as it got
            self.log.warning("agent.restart.memory_pending", timeout=RESTART_FLUSH)
        history = self.host.memory.history(self.key.session)
        self.mirror = SessionMirror(history.sequence)
        messages = window(history.messages, policy.last_n, policy.max_bytes)
        return repaired(messages, "agent_restarted")

    def _merge_session(self) -> None:
        """Bring the history up to the session's: what other agents committed since this
        agent last looked is merged in, in commit order (a compaction replaces it all)."""
        mirror = self.mirror
        if mirror is None:
            return
        try:
            changes = self.host.memory.changes(self.key.session, mirror.sequence)
        except Exception as exc:  # the store failed: run on the agent's own history
            self.log.warning("agent.memory.read_failed", error=f"{type(exc).__name__}: {exc}")
            return
        stored = False
        if changes.replaced and mirror.own_pending and self.shell.options.memory.write:
            # A compaction: which of this agent's messages did it take in? Let the writes
            # land first (rare: compactions are), then read again.
            session = self.key.session
            stored = self.host.memory_writer.flush(MERGE_FLUSH, session=session)
            if stored:
                changes = self.host.memory.changes(session, mirror.sequence)
        merged = mirror.merge(
            self.messages, changes, self.shell.options.memory, own_all_stored=stored
        )
        if merged is not None:
            self.messages = repaired(merged, "merged")
            self.transcript = TranscriptState()
            self.transcript.feed(self.messages)

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Fact):
            getattr(self, f"_fact_{message.name}")(*message.args)
            self._mutated(message.name)
        elif isinstance(message, Call):
            self._answer(message)
        else:
            return super().on_receive(message)
        self._offer_start()
        return None

    def _answer(self, call: Call) -> None:
        reply = call.reply
        try:
            result = getattr(self, f"_on_{call.name}")(*call.args)
            self._mutated(call.name)
        except AgentRuntimeError as exc:
            answer(reply, exception=exc)
            return
        except BaseException as exc:
            answer(reply, exception=exc)
            raise  # escapes the handler: the actor crashes with this reason
        answer(reply, result=result)

    def _offer_start(self) -> None:
        """Offer the start ticket while idle, when a prompt's start can fail only by a race (a
        system prompt that is a Template renders per run, and may fail: no ticket then).

        While a run is in progress the actor offers none, and leaves alone the one its
        driver offers with the run's end (`offer_start_after`): on a busy machine this
        actor may still be finishing the run's start when the run has already ended."""
        if not isinstance(self.system_prompt, str):
            self.shell.withdraw_start()
        elif self.run is None:
            self.shell.offer_start(self.actor_ref)

    def __setattr__(self, name: str, value: Any) -> None:
        # Once started, every assignment to the state goes through the test hook.
        if mutation_hook is not None and self.__dict__.get("_owned"):
            mutation_hook(self.key, name, threading.get_ident())
        super().__setattr__(name, value)

    def _mutated(self, what: str) -> None:
        hook = mutation_hook
        if hook is not None:
            hook(self.key, what, threading.get_ident())

    # -- runs -------------------------------------------------------------------------------------

    def _on_start_run(
        self, prompts: list[Message] | None, trace_links: Sequence[Any], output: Any = None
    ) -> RunView:
        return self._start_run(prompts, None, trace_links, output)

    def _on_start_reserved(
        self,
        reservation: ReservedRun,
        prompts: list[Message],
        trace_links: Sequence[Any],
        output: Any,
    ) -> str:
        """The start of a caller that holds the ticket (`AgentShell.reserve_start`): it did not
        wait for this answer; a start that fails here (a race with the agent's stop) fails
        the call's reply, and the caller ends the run's stream."""
        try:
            return self._start_run(prompts, None, trace_links, output, reservation).run_id
        finally:  # after the run counts as started: the agent never looks idle in between
            self.shell.reservation_arrived(reservation.run_id)

    def _start_run(
        self,
        prompts: list[Message] | None,
        system_prompt: str | None,
        trace_links: Sequence[Any],
        output: Any = None,
        reservation: ReservedRun | None = None,
    ) -> RunView:
        if self.shell.stopped or self.host.stopping:
            raise AgentStopped(self.key)
        if self.run is not None:
            raise AgentBusy(self.key, self.run.view.run_id)
        reserved = self.shell.withdraw_start()
        if reserved is not None and (reservation is None or reserved != reservation.run_id):
            raise AgentBusy(self.key, reserved)  # a caller's reserved start goes first
        # A Template is rendered here, per run, so an update applies without a restart; a
        # missing template or parameter fails the start before anything changes.
        prompt = system_prompt if system_prompt is not None else self._render(self.system_prompt)
        self._merge_session()
        if prompts is None:
            if not self.messages:
                raise CannotContinue("Cannot continue: no messages in history")
            if isinstance(self.messages[-1], AssistantMessage):
                raise CannotContinue("Cannot continue from message role: assistant")
        tools = merge_tools(self.tools, self.shell.options.tool_registry)
        signal = self.host.abort_table.new()
        inbox = RunInbox(
            prompt,
            self.steering_mode,
            self.follow_up_mode,
            take_all(self.steering),
            take_all(self.follow_ups),
        )
        if reservation is None:
            view = RunView(new_run_id(), signal, inbox)
        else:
            view = RunView(reservation.run_id, signal, inbox, reservation.outcome)
        if not self.shell.run_started(view):  # the agent ended since the check above
            self._unstart(view)
            raise AgentStopped(self.key)
        # Built from values validated where they entered (start_agent, set_*, the loop's own
        # messages): not validated again, so a run's start does not grow with the history.
        context = AgentContext.model_construct(
            system_prompt=inbox.system_prompt,
            # Lent, not copied: this actor only appends to its list (the run's own messages,
            # as their facts come) or replaces it (merge, reset), so the run's prefix stays.
            messages=self.messages,
            tools=tools,
            transcript=self.transcript.copy(),  # the run takes it over
        ).lend_history()
        try:
            launch_run(
                self.shell, self.actor_ref, view, prompts, context, self.model, trace_links, output
            )
        except RuntimeError as exc:  # the event loop is gone (the runtime stopped)
            self._unstart(view)
            raise AgentStopped(self.key) from exc
        except BaseException:
            self._unstart(view)  # no end of this run is awaited, then the actor crashes
            raise
        if reservation is not None:  # its driver ends it now, whatever befalls this actor
            reservation.started = True
        self.run = ActiveRun(view)
        self.error = None
        self.ended_ok_at = -math.inf
        self._publish_status()
        self.log.debug("agent.run.started", run_id=view.run_id, continued=prompts is None)
        return view

    def _unstart(self, view: RunView) -> None:
        """Undo the start of a run that will not run: its queued messages go back to the
        agent's queues, its signal is released."""
        inbox = view.inbox
        self.steering.extendleft(reversed(take_all(inbox.steering)))
        self.follow_ups.extendleft(reversed(take_all(inbox.follow_ups)))
        view.signal.abort("not_started")
        if self.shell.run_delivered(view):
            self.shell.close_subscriptions()
        self.host.abort_table.release(view.signal)

    def _current(self, run_id: str) -> ActiveRun | None:
        run = self.run
        return run if run is not None and run.view.run_id == run_id else None

    def _fact_facts(self, run_id: str, facts: list[tuple[str, tuple[Any, ...]]]) -> None:
        """Facts of run `run_id`, in the order they happened."""
        for name, args in facts:
            getattr(self, f"_fact_{name}")(run_id, *args)
            self._mutated(name)
        self._publish_status()  # once per batch: a few per turn, none per token

    def _fact_message_committed(self, run_id: str, message: Message) -> None:
        if self._current(run_id) is not None:
            self.messages.append(message)
            self.transcript.feed((message,))
            if self.mirror is not None:
                self.mirror.committed((message,))

    def _fact_tool_started(self, run_id: str, call_id: str) -> None:
        run = self._current(run_id)
        if run is not None:
            run.pending_tool_calls[call_id] = None

    def _fact_tool_ended(self, run_id: str, call_id: str) -> None:
        run = self._current(run_id)
        if run is not None:
            run.pending_tool_calls.pop(call_id, None)

    def _fact_requeue(self, run_id: str, kind: str, messages: list[Message]) -> None:
        run = self._current(run_id)
        if run is not None:
            inbox = run.view.inbox
            queued = inbox.returned(messages)
            queue = inbox.steering if kind == "steering" else inbox.follow_ups
        else:
            queued = [Queued(m) for m in messages]
            queue = self.steering if kind == "steering" else self.follow_ups
        queue.extendleft(reversed(queued))

    def _fact_run_ended(self, run_id: str, terminal: Event, dangling: list[Message]) -> None:
        run = self._current(run_id)
        if run is None:
            return
        view = run.view
        self.shell.end_handled(view)
        self.messages.extend(dangling)
        self.transcript.feed(dangling)
        if self.mirror is not None:
            self.mirror.committed(dangling)
        if isinstance(terminal, Error):
            self.error = terminal.reason
        self.steering.extend(take_all(view.inbox.steering))
        self.follow_ups.extend(take_all(view.inbox.follow_ups))
        self.run = None
        answer(view.ended, result=terminal)  # unless the driver was first (the actor may lag)
        if isinstance(terminal, AgentEnd):
            self.ended_ok_at = time.monotonic()
            if view.inbox.ending and self.follow_ups:
                self._start_follow_up()

    def _fact_driver_failed(self, reason: str) -> None:
        raise RuntimeError(f"the run driver failed: {reason}")

    def _start_follow_up(self) -> None:
        """Start a run with queued follow-ups (after a run that ended with AgentEnd)."""
        if self.shell.stopped or self.host.stopping:
            return
        if self.shell.withdraw_start() is not None:
            return  # a caller's reserved start comes first; its run takes the follow-ups
        taken = [self.follow_ups.popleft()]
        if self.follow_up_mode == "all":
            taken += take_all(self.follow_ups)
        prompts = [q.message for q in taken]
        system_prompt = next((q.system_prompt for q in reversed(taken) if q.system_prompt), None)
        try:
            self._start_run(prompts, system_prompt, ())
        except AgentStopped:
            self.follow_ups.extendleft(reversed(taken))
        except TemplateError as exc:  # kept for the next run, once the template is fixed
            self.follow_ups.extendleft(reversed(taken))
            self.error = str(exc)
            self.log.warning("agent.follow_up.template_failed", error=str(exc))
            self._publish_status()

    def _render(self, prompt: str | Template) -> str:
        """The system prompt's text: `prompt`, or the rendered template (TemplateError)."""
        if isinstance(prompt, str):
            return prompt
        return PromptTemplates.of(self.host.memory).render(prompt)

    # -- queues -----------------------------------------------------------------------------------

    def _on_steer(self, queued: Queued) -> None:
        self._check_alive()
        (self.run.view.inbox.steering if self.run else self.steering).append(queued)

    def _on_follow_up(self, queued: Queued) -> None:
        """Queue a follow-up; one that lands within `follow_up_poll` after a run that ended with
        `AgentEnd` starts a run of its own."""
        self._check_alive()
        if self.run is not None:
            self.shell.queue_follow_up(self.run.view.inbox, queued)
            return
        self.follow_ups.append(queued)
        if time.monotonic() - self.ended_ok_at <= self.shell.options.follow_up_poll:
            self._start_follow_up()

    def _on_abort(self, reason: str, run_id: str | None = None) -> bool:
        run = self.run
        if run is None or (run_id is not None and run.view.run_id != run_id):
            return False
        run.view.signal.abort(reason)
        for child in self.shell.children():
            if child.handle is not None and not child.stopped:
                # A child that ended meanwhile has nothing to abort: the others still hear it.
                with contextlib.suppress(AgentStopped):
                    child.handle._tell("abort", f"parent_aborted: {reason}")
        return True

    def _on_reset(self) -> bool:
        """Clear history, queues and error if no run is in progress (False otherwise)."""
        self._check_alive()
        if self.run is not None:
            return False
        self.messages = []
        self.transcript = TranscriptState()
        if self.mirror is not None:  # what the session held until now stays out
            self.host.memory_writer.flush(RESTART_FLUSH, session=self.key.session)
            mirror = self.mirror
            mirror.forget(self.host.memory.changes(self.key.session, mirror.sequence).sequence)
        self.steering.clear()
        self.follow_ups.clear()
        self.error = None
        self._publish_status()
        return True

    def _on_idle_future(self) -> Future[Event] | None:
        """The running run's `ended` future (set before its outcome), or None when idle."""
        run = self.run
        return None if run is None else run.view.ended

    # -- settings ---------------------------------------------------------------------------------

    def _on_set_system_prompt(self, prompt: str | Template) -> None:
        self._check_alive()
        if self.run is not None:  # a Template that fails to render changes nothing
            self.run.view.inbox.system_prompt = self._render(prompt)
        self.system_prompt = prompt
        self._keep(system_prompt=prompt)
        if not isinstance(prompt, str):  # before the answer: no start after it takes a ticket
            self.shell.withdraw_start()  # that a render could fail

    def _on_set_model(self, model: ChatModel) -> None:
        self._check_alive()
        self.model = model
        self._keep(model=model)

    def _on_set_tools(self, tools: list[Tool]) -> None:
        self._check_alive()
        self.tools = list(tools)
        self._keep(tools=tuple(tools))

    def _on_set_mode(self, kind: str, mode: QueueMode) -> None:
        self._check_alive()
        if kind == "steering":
            self.steering_mode = mode
        else:
            self.follow_up_mode = mode
        if self.run is not None:
            setattr(self.run.view.inbox, f"{kind}_mode", mode)
        self._keep(**{f"{kind}_mode": mode})

    def _keep(self, **changes: Any) -> None:
        """Carry a `set_*` over to a restarted incarnation."""
        self.shell.options = self.shell.options.model_copy(update=changes)

    # -- subscriptions ----------------------------------------------------------------------------

    def _on_subscribe(self, sub: Subscription) -> None:
        self._check_alive()
        ref = self.actor_ref
        live = self._live()
        if any(r() is sub for r in live):
            return  # the same call again (a retry after a restart)

        def collected(_: weakref.ref[Subscription]) -> None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(Fact("prune"))

        self._publish([*live, weakref.ref(sub, collected)])
        self.host.counters.watch_dropped(sub.stream)

    def _fact_unsubscribe(self, sub: Subscription) -> None:
        self._publish([r for r in self._live() if r() is not sub])

    def _fact_prune(self) -> None:
        self._publish(self._live())

    def _live(self) -> list[weakref.ref[Subscription]]:
        return [r for r in self.shell.subscriptions if (s := r()) is not None and not s.closed]

    def _publish(self, refs: list[weakref.ref[Subscription]]) -> None:
        if not self.shell.stopped:
            self.shell.subscriptions = tuple(refs)

    # -- state ------------------------------------------------------------------------------------

    def _publish_status(self) -> None:
        """Publish what `Runtime.tree()` shows of this agent: one reference swap, so its
        readers never wait for this actor."""
        run = self.run
        if run is None:
            status = ActorStatus(None, self.error, self.steering, self.follow_ups)
        else:
            inbox = run.view.inbox
            status = ActorStatus(run.view.run_id, self.error, inbox.steering, inbox.follow_ups)
        self.shell.status = status

    def _on_state(self) -> dict[str, Any]:
        """The fields of an `AgentState` (copied here; the model is built by the caller)."""
        self._check_alive()
        run = self.run
        inbox = run.view.inbox if run is not None else None
        steering = inbox.steering if inbox is not None else self.steering
        follow_ups = inbox.follow_ups if inbox is not None else self.follow_ups
        return {
            "key": self.key,
            "system_prompt": self._stated_prompt(),
            "model": self.model.info,
            "tools": [t.spec() for t in self.tools],
            "messages": list(self.messages),
            "is_running": run is not None,
            "run_id": run.view.run_id if run is not None else None,
            "stream_message": run.view.stream_message if run is not None else None,
            "pending_tool_calls": list(run.pending_tool_calls) if run is not None else [],
            "error": self.error,
            "steering_queue": [q.message for q in list(steering)],
            "follow_up_queue": [q.message for q in list(follow_ups)],
            "steering_mode": self.steering_mode,
            "follow_up_mode": self.follow_up_mode,
            "subscriptions": len(self._live()),
        }

    def _stated_prompt(self) -> str:
        """The system prompt as a state shows it: a Template rendered now ("" if it cannot be)."""
        try:
            return self._render(self.system_prompt)
        except TemplateError:
            return ""

    def _check_alive(self) -> None:
        if self.shell.stopped:
            raise AgentStopped(self.key)
