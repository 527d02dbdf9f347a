"""AgentActor: the actor that owns one agent's state, on its runtime's event loop.

It has no thread of its own (an `AsyncioActor`): its messages are handled one at a time by
the loop that also runs its runs. Every operation is one frozen message class of
`_protocol`, dispatched by type.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, ClassVar, TypeVar

import pykka

from agent_runtime._errors import (
    AgentBusy,
    AgentRuntimeError,
    AgentStopped,
    ApprovalError,
    CannotContinue,
)
from agent_runtime.abort import parent_aborted
from agent_runtime.agent._approvals import ApprovalBook, ParkedTurn, read_agent, store_parked
from agent_runtime.agent._cell import AgentCell
from agent_runtime.agent._history import repaired
from agent_runtime.agent._protocol import (
    Abort,
    Amended,
    ApprovalRequested,
    ApprovalWithdrawn,
    CarriedStored,
    CommitFailed,
    Committed,
    Decide,
    FollowUp,
    GetState,
    HistoryLoaded,
    IdleWait,
    MergeSession,
    ModeChanged,
    PromptRendered,
    PruneSubscriptions,
    Pushed,
    Queued,
    QueueKind,
    QueuesChanged,
    Requeue,
    Reset,
    RunBroke,
    RunEnded,
    SetMode,
    SetModel,
    SetSystemPrompt,
    SetTools,
    StartRun,
    Steer,
    Subscribe,
    ToolEnded,
    ToolStarted,
    Unsubscribe,
    WouldEnd,
)
from agent_runtime.agent._run import AgentRun
from agent_runtime.agent._run_queues import RunQueues
from agent_runtime.agent._session_sync import SessionMirror
from agent_runtime.agent._settings import loop_config
from agent_runtime.agent._status import ActorStatus
from agent_runtime.agent._step_batch import flush_gathered
from agent_runtime.agent._storage import forget_prompt, session_sequence
from agent_runtime.config import QueueMode
from agent_runtime.events import Error
from agent_runtime.llm.base import ChatModel
from agent_runtime.loop import TranscriptState
from agent_runtime.loop._approval import replace_amended
from agent_runtime.messages import AssistantMessage, Message
from agent_runtime.templates import Template
from agent_runtime.tools import Tool, merge_tools
from supervisors import AsyncioActor, ExitReason, Monitor, watch
from supervisors._actor import crash_reason
from supervisors._log import LibraryLogger

Handler = Callable[["AgentActor", Any], Any]


T = TypeVar("T")


class AgentActor(AsyncioActor):
    """The agent's state: history, queues, modes, system prompt, model, tools, its run and
    its subscriptions; changed only by the messages of `_protocol`, on the agent's loop.

    Guarantees:
    - No handler does storage I/O or waits: a run's storage work is done by the run, off the
      loop; a restarted incarnation reads its history on the session writer's threads and
      takes calls once it has it (callers wait for it as for a restart).
    - An `AgentRuntimeError` a handler raises (busy, stopped, cannot continue) goes back to
      the caller; any other exception is returned to the caller and crashes the actor: the
      supervisor sees an abnormal exit with that reason, and the run it had ends with
      `Error("agent_crashed: ...")`.
    - Steering and follow-ups queued while a run is on are pushed into the run's own queues
      as they are handled; the run takes them at its boundaries without asking. What it did
      not deliver comes back with its end, ahead of what was queued since.
    - A run ends only when the actor, handling its `WouldEnd` after what its mailbox held,
      has pushed it no follow-up: a follow-up that arrives after that waits in the queue for
      the next prompt, and no run starts that nobody prompted.
    - The history a run starts from is an immutable snapshot; what the run commits comes
      back by message (`Committed`, `RunEnded`), in order.
    """

    use_actor_registry: ClassVar[bool] = False  # pykka's registry is a list behind a lock

    # Slots for the agent's own fields: with pykka's and the exit reporting's, an instance
    # dict of them all outgrows CPython's shared-key layout (30 keys) and costs ~1.6 KB more
    # per agent.
    __slots__ = (
        "approvals",
        "cell",
        "error",
        "follow_up_mode",
        "follow_ups",
        "forget_session",
        "host",
        "key",
        "messages",
        "mirror",
        "model",
        "pending_tool_calls",
        "ready",
        "rendered_prompt",
        "reset_read",
        "run",
        "steering",
        "steering_mode",
        "system_prompt",
        "tools",
        "transcript",
        "unstored",
    )

    def __init__(self, cell: AgentCell) -> None:
        super().__init__()
        self.cell = cell
        self.key = cell.key
        self.host = cell.host
        options = cell.options
        self.system_prompt: str | Template = options.system_prompt
        self.rendered_prompt = (
            options.system_prompt if isinstance(options.system_prompt, str) else ""
        )
        self.model: ChatModel = options.model
        self.tools: tuple[Tool, ...] = tuple(options.tools)
        self.steering_mode: QueueMode = options.steering_mode
        self.follow_up_mode: QueueMode = options.follow_up_mode
        self.messages: list[Message] = []
        self.transcript = TranscriptState()  # the incremental check of `messages`
        # Tuples, replaced on each change: the queues are short, and an empty tuple is no
        # object for the cyclic collector to walk in each idle agent (an empty list is one).
        self.steering: tuple[Queued, ...] = ()
        self.follow_ups: tuple[Queued, ...] = ()
        self.error: str | None = None
        self.run: AgentRun | None = None
        self.pending_tool_calls: dict[str, None] = {}
        self.mirror: SessionMirror | None = None  # with a policy that reads the session
        self.forget_session = False  # a reset: the next merge starts over from the store
        self.reset_read: Future[int] | None = None  # where the reset left the session
        self.ready = False  # the history is in: calls are taken
        self.approvals = ApprovalBook()  # tool calls waiting for approval, decisions
        # The end of `messages` not in session memory yet: the kept prompt of a crashed
        # incarnation, which the next run commits with its first turn (`CarriedStored`).
        self.unstored: tuple[Message, ...] = ()

    @property
    def log(self) -> LibraryLogger:
        return self.cell.log

    # -- lifecycle (on the loop) ------------------------------------------------------------------

    def on_start(self) -> None:
        cell = self.cell
        ref = self.actor_ref
        watch(ref, _IncarnationExit(cell, self))
        self.host.registry.register(
            self.key,
            cell.handle,
            ref=ref,
            metadata={"model": self.model.info.model, "restart": cell.options.restart},
        )
        preloaded, cell.preloaded = cell.preloaded, None
        if preloaded is not None:
            self._history_in(*preloaded, parked=cell.parked, unstored=cell.unstored)
            cell.parked, cell.unstored = None, ()
            return
        # A restart: the history is read on the session writer's threads, after what the
        # crashed incarnation's runs handed to it (the session's order), then told here.
        writer = self.host.memory_writer
        read = functools.partial(
            read_agent, writer.memory, self.key, cell.options.memory, "agent_restarted"
        )
        try:
            future = writer.submit(self.key.session, read)
        except RuntimeError:  # the writer is closed: the runtime is stopping
            self._history_in((), 0)
            return

        def loaded(done: Any) -> None:
            try:
                messages, sequence, parked, unstored = done.result()
            except Exception as exc:
                self.log.warning("agent.restart.read_failed", error=f"{type(exc).__name__}: {exc}")
                messages, sequence, parked, unstored = (), 0, None, ()
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(HistoryLoaded(tuple(messages), sequence, parked, unstored))

        future.add_done_callback(loaded)

    def _history_in(
        self,
        messages: tuple[Message, ...],
        sequence: int,
        parked: ParkedTurn | None = None,
        unstored: tuple[Message, ...] = (),
    ) -> None:
        self.approvals.parked = parked
        self._publish_approvals()
        self.messages = list(messages)
        self.transcript.feed(self.messages)
        self.unstored = unstored
        if self.cell.options.memory.read:
            self.mirror = SessionMirror(sequence)
            self.mirror.carried(unstored)  # the agent's own, not handed to the writer yet
        self.ready = True
        self._publish_status()
        self.cell.attach(self)

    def on_stop(self) -> None:
        if self.run is not None:
            self.run.signal.abort("agent_stopped")

    def take_run(self) -> AgentRun | None:
        """The run in flight, no longer held here (this incarnation exited, and a run holds
        its actor: held on, the two would be a reference cycle)."""
        run, self.run = self.run, None
        return run

    # -- dispatch ---------------------------------------------------------------------------------

    def on_receive(self, message: Any) -> Any:
        handler = _HANDLERS.get(type(message))
        if handler is None:
            return super().on_receive(message)
        try:
            return handler(self, message)
        except AgentRuntimeError:
            raise  # the caller's: the agent goes on
        except BaseException as exc:  # a bug: returned to the caller, and the actor crashes
            self._record_reason(crash_reason(exc))
            self.stop_now()
            raise

    def _check_alive(self) -> None:
        if self.cell.stopped:
            raise AgentStopped(self.key)

    # -- runs -------------------------------------------------------------------------------------

    def _on_start_run(self, msg: StartRun) -> str:
        try:
            return self._start_run(msg)
        except BaseException as exc:
            if not msg.outcome.settled:
                msg.outcome.set_exception((type(exc), exc, exc.__traceback__))
            raise

    def _start_run(self, msg: StartRun) -> str:
        cell = self.cell
        if cell.stopped or self.host.stopping:
            raise AgentStopped(self.key)
        if self.run is not None:
            raise AgentBusy(self.key, self.run.run_id)
        prompts = msg.prompts
        parked = self.approvals.check_start(self.key, prompts is None)  # a turn waits?
        if prompts is None and parked is None:
            if not self.messages:
                raise CannotContinue("Cannot continue: no messages in history")
            if isinstance(self.messages[-1], AssistantMessage):
                raise CannotContinue("Cannot continue from message role: assistant")
        options = cell.options
        model = self.host.model_for_run(self.key, self.model)  # Runtime.override_model
        config, per_run = loop_config(cell, model, msg.run_id, msg.trace_links, msg.output)
        # What is queued goes to the run: it takes from its own queues from now on.
        queues = RunQueues(self.steering, self.follow_ups, self.steering_mode, self.follow_up_mode)
        run = AgentRun(
            cell,
            self,
            msg.run_id,
            self.host.abort_table.new(),
            msg.outcome,
            prompts,
            tuple(self.messages),
            self.transcript.copy(),
            self.system_prompt,
            merge_tools(list(self.tools), options.tool_registry),
            config,
            per_run,
            self.mirror.sequence if self.mirror is not None else None,
            queues,
            parked=parked,
            carried=self.unstored,
            reset_at=self.reset_read,  # set only while a reset waits for its merge
        )
        if msg.subscription is not None:  # taken with the start, in the same step
            self._on_subscribe(Subscribe(msg.subscription))
        self.approvals.run_started()
        cell.run_started(run)
        try:
            self.host.loop_tasks.spawn(run.drive(), run.done)
        except RuntimeError as exc:  # the event loop is gone (the runtime stopped)
            cell.run_delivered(run)  # it never started: no end of it is to come
            raise AgentStopped(self.key) from exc
        self.steering = self.follow_ups = ()
        self.run = run
        self.pending_tool_calls = {}
        self.error = None
        self._publish_status()
        self.log.debug("agent.run.started", run_id=msg.run_id, continued=prompts is None)
        return msg.run_id

    def _current(self, run_id: str) -> AgentRun | None:
        run = self.run
        return run if run is not None and run.run_id == run_id else None

    def _on_merge_session(
        self, msg: MergeSession
    ) -> tuple[tuple[Message, ...], TranscriptState] | None:
        """What the session's other agents committed since, merged into the history the run
        starts from (in commit order); None when the history stays as it is."""
        mirror = self.mirror
        if mirror is None or self._current(msg.run_id) is None:
            return None
        changes = msg.changes
        if self.forget_session:  # a reset: what the session held until it stays out
            self.forget_session, self.reset_read = False, None
            if msg.reset_point is None:  # not known where it left the session: start from now
                mirror.forget(changes.sequence)
                return None
            mirror.forget(msg.reset_point)  # what others committed since the reset comes in
        # Read in the session's order on its writer, after every batch this agent handed it
        # before: its own messages are all stored (a compaction took in what it took in).
        merged = mirror.merge(self.messages, changes, self.cell.options.memory)
        if merged is None:
            return None
        self.messages = repaired(merged, "merged")
        self.transcript = TranscriptState()
        self.transcript.feed(self.messages)
        return tuple(self.messages), self.transcript.copy()

    def _on_committed(self, msg: Committed) -> None:
        if self._current(msg.run_id) is not None:
            self._append(msg.messages)

    def _on_amended(self, msg: Amended) -> None:
        if self._current(msg.run_id) is None:
            return
        replace_amended(self.messages, msg.old, msg.new)
        if self.mirror is not None:
            self.mirror.amended(msg.old, msg.new)

    def _append(self, messages: tuple[Message, ...]) -> None:
        self.messages.extend(messages)
        self.transcript.feed(messages)
        if self.mirror is not None:
            self.mirror.committed(messages)

    def _on_tool_started(self, msg: ToolStarted) -> None:
        if self._current(msg.run_id) is not None:
            self.pending_tool_calls[msg.call_id] = None

    def _on_tool_ended(self, msg: ToolEnded) -> None:
        if self._current(msg.run_id) is not None:
            self.pending_tool_calls.pop(msg.call_id, None)

    def _on_would_end(self, _msg: WouldEnd) -> None:
        """Nothing to do: handled after the mailbox, whose follow-ups were pushed by then."""

    def _on_queues_changed(self, msg: QueuesChanged) -> None:
        if self._current(msg.run_id) is not None:
            self._publish_status()

    def _on_requeue(self, msg: Requeue) -> None:
        if msg.kind == "steering":
            self.steering = (*msg.messages, *self.steering)
        else:
            self.follow_ups = (*msg.messages, *self.follow_ups)
        self._publish_status()

    def _on_run_ended(self, msg: RunEnded) -> None:
        if self._current(msg.run_id) is None:
            return
        self._append(msg.dangling)
        # Not delivered: ahead of what came since.
        self.steering = (*msg.steering, *self.steering)
        self.follow_ups = (*msg.follow_ups, *self.follow_ups)
        if isinstance(msg.terminal, Error):
            self.error = msg.terminal.reason
        self.approvals.run_ended()
        self._publish_approvals()
        self.run = None
        self.pending_tool_calls = {}
        self._publish_status()

    def _on_commit_failed(self, msg: CommitFailed) -> None:
        """Whichever run it was (it may have ended): those messages stay in the history, in
        their places, and are no longer looked for in the store."""
        if self.mirror is not None:
            self.mirror.failed(msg.messages)

    def _on_carried_stored(self, msg: CarriedStored) -> None:
        if self._current(msg.run_id) is not None:
            self.unstored = ()
            if self.mirror is not None:
                self.mirror.sent()

    def _on_run_broke(self, msg: RunBroke) -> None:
        raise RuntimeError(f"the agent's run failed: {msg.reason}")

    def _on_history_loaded(self, msg: HistoryLoaded) -> None:
        if not self.ready:
            self._history_in(msg.messages, msg.sequence, msg.parked, msg.unstored)

    # -- queues -----------------------------------------------------------------------------------

    def _on_steer(self, msg: Steer) -> None:
        self._check_alive()
        self._push("steering", msg.queued)

    def _on_follow_up(self, msg: FollowUp) -> None:
        """Queue a follow-up: the running run takes it before it ends; an idle agent keeps it
        for the run the next prompt starts."""
        self._check_alive()
        self._push("follow_up", msg.queued)

    def _push(self, kind: QueueKind, queued: Queued) -> None:
        """To the running run's queues; kept here when idle or once the run has ended."""
        run = self.run
        if run is None or not run.deliver(Pushed(kind, queued)):
            if kind == "steering":
                self.steering = (*self.steering, queued)
            else:
                self.follow_ups = (*self.follow_ups, queued)
        self._publish_status()

    def _on_abort(self, msg: Abort) -> bool:
        run = self.run
        if run is None or (msg.run_id is not None and run.run_id != msg.run_id):
            return False
        run.signal.abort(msg.reason)
        for child in list(self.cell.children):
            actor = child.actor
            if actor is not None and not child.stopped:  # a child that ended has no run
                with contextlib.suppress(pykka.ActorDeadError):
                    actor.actor_ref.tell(Abort(parent_aborted(msg.reason)))
        return True

    def _on_reset(self, _msg: Reset) -> bool:
        """Clear history, queues and error if no run is in progress (False otherwise)."""
        self._check_alive()
        if self.run is not None:
            return False
        if self.approvals.parked is not None:  # the parked turn goes with the history
            self.approvals.parked = None
            self._keep_parked(None)
            self._publish_approvals()
        self.messages = []
        self.transcript = TranscriptState()
        if self.unstored:  # a crashed run's kept prompt goes with the history, in the store too
            self.unstored = ()
            self._on_writer(forget_prompt, self.key)
        self.forget_session = self.mirror is not None
        if self.forget_session:  # where the session stands, read after the agent's own writes
            self.reset_read = self._on_writer(session_sequence, self.key.session)
        self.steering = self.follow_ups = ()
        self.error = None
        self._publish_status()
        return True

    def _on_idle_wait(self, _msg: IdleWait) -> tuple[Any, ...]:
        """The outcome of the run whose end is still to be delivered (the newest), in a tuple
        (a handler's answer must not be an awaitable); empty when there is none."""
        run = self.run or self.cell.undelivered()
        return () if run is None else (run.outcome,)

    # -- approvals --------------------------------------------------------------------------------

    def _on_decide(self, msg: Decide) -> None:
        """A human's decision on a waiting call: handed to the run that waits, or recorded in
        the parked turn (and kept) for the `continue_run` that runs it."""
        self._check_alive()
        tools = tuple(merge_tools(list(self.tools), self.cell.options.tool_registry))
        decision, parked = self.approvals.decide(
            msg.tool_call_id, msg.approved, msg.args, msg.reason, msg.by, tools
        )
        if parked is not None:
            self._keep_parked(parked)
        elif self.run is None or not self.run.approvals.decide(decision):
            raise ApprovalError(  # it stopped waiting meanwhile (a timeout, an abort)
                f"tool call {msg.tool_call_id!r} no longer waits for approval",
                msg.tool_call_id,
                [p.tool_call_id for p in self.approvals.listing()],
                "decided",
            )
        self._publish_approvals()

    def _on_approval_requested(self, msg: ApprovalRequested) -> None:
        if self._current(msg.run_id) is not None:
            self.approvals.requested(msg.pending)
            self._publish_approvals()

    def _on_approval_withdrawn(self, msg: ApprovalWithdrawn) -> None:
        if self._current(msg.run_id) is not None:
            self.approvals.withdrawn(msg.tool_call_id, msg.decision)
            self._publish_approvals()

    def _on_writer(self, work: Callable[..., T], *args: Any) -> Future[T] | None:
        """`work(memory, *args)` on the session's writer, after what the agent handed it
        before (off the loop, in order); None once the writer is closed (the runtime stops)."""
        writer = self.host.memory_writer
        try:
            return writer.submit(self.key.session, functools.partial(work, writer.memory, *args))
        except RuntimeError:
            return None

    def _keep_parked(self, parked: ParkedTurn | None) -> None:
        """Keep the parked turn as it is now in session memory."""
        if self.cell.options.memory.write:
            data = parked.model_dump(mode="json") if parked is not None else None
            self._on_writer(store_parked, self.key, data)

    def _publish_approvals(self) -> None:
        """Publish the waiting calls for `Runtime.pending_approvals()` (one reference swap)."""
        self.cell.pending_approvals = tuple(self.approvals.listing())

    # -- settings ---------------------------------------------------------------------------------

    def _on_set_system_prompt(self, msg: SetSystemPrompt) -> None:
        self._check_alive()
        self.system_prompt = msg.prompt
        if msg.rendered is not None:
            self.rendered_prompt = msg.rendered
            if self.run is not None:
                self.run.set_system_prompt(msg.rendered)
        self._keep(system_prompt=msg.prompt)

    def _on_set_model(self, msg: SetModel) -> None:
        self._check_alive()
        self.model = msg.model
        self._keep(model=msg.model)

    def _on_set_tools(self, msg: SetTools) -> None:
        self._check_alive()
        self.tools = msg.tools
        self._keep(tools=msg.tools)

    def _on_set_mode(self, msg: SetMode) -> None:
        self._check_alive()
        if msg.kind == "steering":
            self.steering_mode = msg.mode
            self._keep(steering_mode=msg.mode)
        else:
            self.follow_up_mode = msg.mode
            self._keep(follow_up_mode=msg.mode)
        if self.run is not None:
            self.run.deliver(ModeChanged(msg.kind, msg.mode))

    def _keep(self, **changes: Any) -> None:
        """Carry a `set_*` over to a restarted incarnation."""
        self.cell.options = self.cell.options.model_copy(update=changes)

    def _on_prompt_rendered(self, msg: PromptRendered) -> None:
        self.rendered_prompt = msg.text

    # -- subscriptions ----------------------------------------------------------------------------

    def _on_subscribe(self, msg: Subscribe) -> None:
        self._check_alive()
        sub = msg.subscription
        live = self.cell.live_subscriptions()
        if any(r() is sub for r in live):
            return  # the same call again (a retry after a restart)
        cell = self.cell
        self._publish_subscriptions([*live, cell.weak_subscription(sub)])
        self.host.counters.watch_dropped(sub.stream)

    def _on_unsubscribe(self, msg: Unsubscribe) -> None:
        sub = msg.subscription
        self._publish_subscriptions([r for r in self.cell.live_subscriptions() if r() is not sub])

    def _on_prune(self, _msg: PruneSubscriptions) -> None:
        self._publish_subscriptions(self.cell.live_subscriptions())

    def _publish_subscriptions(self, refs: list[Any]) -> None:
        if not self.cell.stopped:
            # Tokens gathered for the old set go to it first: a new subscription gets none
            # made before it began, a closing one all made before it closed.
            flush_gathered(self.cell.loop)
            self.cell.subscriptions = tuple(refs)

    # -- state ------------------------------------------------------------------------------------

    def _publish_status(self) -> None:
        """Publish what `Runtime.tree()` shows of this agent: one reference swap, so its
        readers never wait for this actor."""
        run = self.run
        steering, follow_ups = len(self.steering), len(self.follow_ups)
        if run is not None:
            steering += run.queues.count("steering")
            follow_ups += run.queues.count("follow_up")
        self.cell.status = ActorStatus(
            run.run_id if run is not None else None, self.error, steering, follow_ups
        )

    def _on_get_state(self, _msg: GetState) -> dict[str, Any]:
        """The fields of an `AgentState` (copied here; the model is built by the caller)."""
        self._check_alive()
        run = self.run
        return {
            "key": self.key,
            "system_prompt": self.system_prompt
            if isinstance(self.system_prompt, str)
            else self.rendered_prompt,
            "model": self.model.info,
            "tools": [t.spec() for t in self.tools],
            "messages": list(self.messages),
            "is_running": run is not None,
            "run_id": run.run_id if run is not None else None,
            "stream_message": run.stream_message if run is not None else None,
            "pending_tool_calls": list(self.pending_tool_calls),
            "pending_approvals": self.approvals.listing(),
            "error": self.error,
            "steering_queue": [q.message for q in self._queued("steering")],
            "follow_up_queue": [q.message for q in self._queued("follow_up")],
            "steering_mode": self.steering_mode,
            "follow_up_mode": self.follow_up_mode,
            "subscriptions": len(self.cell.live_subscriptions()),
        }

    def _queued(self, kind: QueueKind) -> tuple[Queued, ...]:
        """The queue of `kind` in delivery order: the run's, then what came after its end."""
        own = self.steering if kind == "steering" else self.follow_ups
        run = self.run
        return (*run.queued(kind), *own) if run is not None else own


class _IncarnationExit(Monitor):
    """The monitor of an incarnation's exit, its own callback (one object per agent for the
    cyclic collector to walk, where a callback and its monitor were two)."""

    def __init__(self, cell: AgentCell, actor: AgentActor) -> None:
        super().__init__(None)
        self.cell = cell
        self.actor = actor

    def exited(self, _ref: Any, reason: ExitReason) -> None:
        """On whichever thread the exit was reported: the cell hears of it on its loop."""
        cell = self.cell
        cell.on_loop(functools.partial(cell.exited, self.actor, reason))


_HANDLERS: dict[type, Handler] = {
    StartRun: AgentActor._on_start_run,
    Steer: AgentActor._on_steer,
    FollowUp: AgentActor._on_follow_up,
    Abort: AgentActor._on_abort,
    GetState: AgentActor._on_get_state,
    Reset: AgentActor._on_reset,
    IdleWait: AgentActor._on_idle_wait,
    SetSystemPrompt: AgentActor._on_set_system_prompt,
    SetModel: AgentActor._on_set_model,
    SetTools: AgentActor._on_set_tools,
    SetMode: AgentActor._on_set_mode,
    Subscribe: AgentActor._on_subscribe,
    Unsubscribe: AgentActor._on_unsubscribe,
    PruneSubscriptions: AgentActor._on_prune,
    WouldEnd: AgentActor._on_would_end,
    QueuesChanged: AgentActor._on_queues_changed,
    MergeSession: AgentActor._on_merge_session,
    Committed: AgentActor._on_committed,
    Amended: AgentActor._on_amended,
    ToolStarted: AgentActor._on_tool_started,
    ToolEnded: AgentActor._on_tool_ended,
    Requeue: AgentActor._on_requeue,
    RunEnded: AgentActor._on_run_ended,
    RunBroke: AgentActor._on_run_broke,
    CarriedStored: AgentActor._on_carried_stored,
    CommitFailed: AgentActor._on_commit_failed,
    HistoryLoaded: AgentActor._on_history_loaded,
    Decide: AgentActor._on_decide,
    ApprovalRequested: AgentActor._on_approval_requested,
    ApprovalWithdrawn: AgentActor._on_approval_withdrawn,
    PromptRendered: AgentActor._on_prompt_rendered,
}
"""Every message the actor takes, by its exact class (`_protocol`)."""
