"""StepContext: what a running step sees of its workflow (identity, attempt, agents, the
choice of the next step, pauses), and StepAgent, an agent as a step uses it."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Unpack

from pydantic import JsonValue

from agent_runtime._errors import AgentStopped, AlreadyRegistered
from agent_runtime._key import AgentKey
from agent_runtime.agent import Agent, AgentOptionsDict, RunResult
from agent_runtime.messages import Message
from agent_runtime.workflows._host import WorkflowHost
from agent_runtime.workflows._pause import PauseGate
from agent_runtime.workflows._records import StepRun
from agent_runtime.workflows._workflow import Definition

_UNDECIDED = object()

AgentOptionsFor = Callable[[AgentKey], dict[str, Any]]


class StepContext:
    """The context of one attempt of a step (DESIGN.md workflows): passed to the step.

    Attributes:
        workflow_id: the workflow's id, also its `session`: agents named by role find or
            start in it.
        step: the step's name.
        attempt: this attempt's number in the current visit of the step, from 1. It grows
            with each retry and with each re-run after a crash or restart interrupted the
            step: more than 1 means an earlier attempt may have done part of the work.
        history: the attempts of steps that ended before this one, oldest first.
        runtime: the runtime the workflow runs in.

    Guarantees: everything here runs on the runtime's event loop; nothing blocks it (agents
    start on a worker thread). The agents the step used through `agent` and `start_agent`
    are remembered, and their runs are aborted when the step times out or the workflow is
    canceled (an abort ends whatever run such an agent has then).
    """

    def __init__(
        self,
        *,
        host: WorkflowHost,
        definition: Definition,
        workflow_id: str,
        step: str,
        attempt: int,
        history: tuple[StepRun, ...],
        gate: PauseGate,
        agent_options: AgentOptionsFor,
    ) -> None:
        self.runtime = host
        self.workflow_id = workflow_id
        self.step = step
        self.attempt = attempt
        self.history = history
        self._definition = definition
        self._gate = gate
        self._agent_options = agent_options
        self._next: object = _UNDECIDED
        self._agents: dict[AgentKey, Agent] = {}

    @property
    def session(self) -> str:
        """The workflow's session: its id."""
        return self.workflow_id

    @property
    def paused(self) -> bool:
        """True while the step waits in `pause`."""
        return self._gate.paused

    # -- what comes next --------------------------------------------------------------------

    def transition_to(self, step: str) -> None:
        """Go on at `step` once this step returns (the last choice of the step wins).

        Raises:
            UnknownStep: the workflow has no such step; the workflow then fails with this
                error (no retry: a retry would make the same choice).
        """
        self._definition.step(step, where=f"step {self.step!r}: transition_to")
        self._next = step

    def end(self) -> None:
        """End the workflow (`completed`) once this step returns."""
        self._next = None

    @property
    def decided(self) -> bool:
        """Whether the step chose `transition_to` or `end`."""
        return self._next is not _UNDECIDED

    @property
    def next_step(self) -> str | None:
        """The step chosen to come next (None: the end); see `decided`."""
        return self._next if isinstance(self._next, str) else None

    # -- pauses -----------------------------------------------------------------------------

    async def pause(self, reason: str) -> JsonValue:
        """Pause the workflow until `runtime.workflows.resume_with(id, value)`; returns value.

        The workflow is committed as `paused` with `reason` before this waits, and stays
        paused across restarts. The step's timeout does not run while it is paused. After a
        restart, `resume_with` runs the step again from its start (with the state committed
        before it, `attempt` one higher), and this call then returns the stored value at
        once: the n-th pause of a step returns the n-th value given to that step's pauses,
        so the code of the step before a pause must be idempotent too. The values are kept
        until the step ends.

        Raises:
            TypeError: `reason` is not a str.
        """
        return await self._gate.pause(reason)

    # -- agents -----------------------------------------------------------------------------

    def agent(
        self,
        key: AgentKey | tuple[str, str, int] | tuple[str, int] | str,
        **options: Unpack[AgentOptionsDict],
    ) -> StepAgent:
        """The agent under `key`, found in the registry or started at first use.

        `key` is a full `(session, role, index)` key, or a role (index 0) or `(role, index)`
        in the workflow's session. A missing agent is started with
        `Workflow.agent_options(key)` updated with `options`.

        Raises:
            ValueError: an invalid key (named).
        """
        return StepAgent(self, self._key(key), dict(options))

    async def start_agent(
        self,
        key: AgentKey | tuple[str, str, int] | tuple[str, int] | str,
        **options: Unpack[AgentOptionsDict],
    ) -> Agent:
        """Start an agent under `key` (as `agent` reads it) with `options` (only those given:
        not `Workflow.agent_options`), off the loop; remembered for aborts.

        Raises:
            AlreadyRegistered: a live agent holds the key (use `agent` to find or start).
            TypeError, ValueError: as `runtime.start_agent`.
        """
        agent = await self.runtime.astart_agent(self._key(key), **options)
        self._agents[agent.key] = agent
        return agent

    async def _find_or_start(self, key: AgentKey, options: dict[str, Any]) -> Agent:
        found = self.runtime.registry.lookup(key)
        if not isinstance(found, Agent):
            try:
                found = await self.runtime.astart_agent(
                    key, **{**self._agent_options(key), **options}
                )
            except AlreadyRegistered as exc:  # started by someone else meanwhile
                if not isinstance(exc.holder, Agent):
                    raise
                found = exc.holder
        self._agents[key] = found
        return found

    def abort_runs(self, reason: str) -> None:
        """Abort the run of every agent this step used (never blocks on the loop)."""
        for agent in self._agents.values():
            if agent.alive:
                agent.abort(reason)

    async def await_agents_idle(self, timeout: float) -> bool:
        """Wait until no agent this step used has a run in progress (an aborted run has
        ended), for at most `timeout` seconds in all; False if one still runs then. A
        stopped agent counts as idle."""
        deadline = time.monotonic() + timeout
        for agent in list(self._agents.values()):
            left = deadline - time.monotonic()
            try:
                await agent.await_idle(max(left, 0.0))
            except TimeoutError:
                return False
            except AgentStopped:  # stopped meanwhile: it runs nothing
                continue
        return True

    def _key(self, key: object) -> AgentKey:
        if isinstance(key, str):
            return AgentKey.of((self.workflow_id, key, 0))
        if isinstance(key, tuple | list) and len(key) == 2:
            return AgentKey.of((self.workflow_id, *key))
        return AgentKey.of(key)

    def __repr__(self) -> str:
        return f"<StepContext {self.workflow_id} step={self.step} attempt={self.attempt}>"


class StepAgent:
    """An agent as a step uses it (`ctx.agent(key)`): found or started at first use, and
    remembered by the step for aborts."""

    def __init__(self, ctx: StepContext, key: AgentKey, options: dict[str, Any]) -> None:
        self._ctx = ctx
        self.key = key
        self._options = options

    async def get(self) -> Agent:
        """The Agent, started first if none holds the key (see `StepContext.agent`)."""
        return await self._ctx._find_or_start(self.key, self._options)

    async def arun(
        self, input: str | Message | Sequence[Message], timeout: float | None = None, **run: Any
    ) -> RunResult:
        """`Agent.arun` on the agent (started first if needed): a run to its end.

        It raises what `Agent.arun` raises (`RunFailed`, `RunCanceled`, `AgentBusy`,
        `TimeoutError`).
        """
        agent = await self.get()
        return await agent.arun(input, timeout, **run)

    def __repr__(self) -> str:
        return f"<StepAgent {tuple(self.key)!r}>"
