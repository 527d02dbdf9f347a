"""ClusterAgent: the handle of an agent on a cluster node; each call is a Ray call to it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from agent_runtime._errors import AgentStopped, RunFailed
from agent_runtime._key import AgentKey
from agent_runtime.agent import AgentState, RunResult
from agent_runtime.cluster._errors import NodeLost
from agent_runtime.cluster._host import ClusterHost
from agent_runtime.cluster._ray import get, node_failure
from agent_runtime.cluster._subscription import NODE_LOST, ClusterSubscription
from agent_runtime.cluster._wire import RemoteError
from agent_runtime.event_stream import OverflowPolicy
from agent_runtime.events import Event
from agent_runtime.messages import Message

CALL_TIMEOUT = 60.0  # seconds for one call to a node (an agent answers calls at once)


class ClusterAgent:
    """The handle of one agent of a `ClusterRuntime`, with `Agent`'s methods for what crosses
    processes: `prompt`, `continue_run`, `steer`, `follow_up`, `abort`, `state`, `run`,
    `stream`, `subscribe`, `wait_for_idle`, `reset`, `set_*`, `stop`.

    Each call is one Ray call to the node that runs the agent (found in the cluster registry
    and remembered; looked up again when the agent moved), answered as the local `Agent`
    answers it: its value, or the same exception with its facts (`AgentBusy`, `RunFailed`,
    ...). Arguments and answers travel pickled: models and tools given to `set_model` /
    `set_tools` must be importable on the nodes. Thread-safe; handles are cheap (equal keys,
    equal handles) and stay valid across a node loss when the agent is `transient`.

    Raises (every call but `stop()` and the properties):
        AgentStopped: no agent runs under the key (stopped, or lost with its node).
        NodeLost: the node died or restarted during the call (`run` raises
            `RunFailed(reason="node_lost")` instead).
    """

    def __init__(self, cluster: ClusterHost, key: AgentKey, node: str | None = None) -> None:
        self._cluster = cluster
        self.key = key
        self._node = node

    @property
    def node(self) -> str | None:
        """The name of the node that runs the agent now, or None if none does."""
        entry = self._cluster._entry(self.key)
        self._node = None if entry is None else entry.node
        return self._node

    @property
    def alive(self) -> bool:
        """True while the cluster registry holds the agent (False once stopped or lost)."""
        return self._cluster._entry(self.key) is not None

    # -- calls ------------------------------------------------------------------------------

    def _call(self, method: str, *args: Any, timeout: float = CALL_TIMEOUT, **kwargs: Any) -> Any:
        return self._invoke("call", (self.key, method, args, kwargs), timeout, retry=True)

    def _invoke(self, name: str, args: tuple[Any, ...], timeout: float | None, retry: bool) -> Any:
        """`node.<name>(*args)` on the agent's node. A node that does not know the agent, or
        (with `retry`) one that failed, is asked once more when the registry shows the agent
        moved meanwhile (recovered on another node)."""
        for attempt in range(2):
            node_name = self._node or self._where()
            node = self._cluster._node_actor(node_name)
            try:
                answer = get(getattr(node, name).remote(*args), timeout)
            except Exception as exc:
                if not node_failure(exc):
                    raise
                if retry and attempt == 0 and self._moved(node_name):
                    continue
                if name == "run":
                    raise RunFailed(NODE_LOST) from exc
                raise NodeLost(self.key, node_name, type(exc).__name__) from None
            if isinstance(answer, RemoteError):
                error = answer.rebuild()
                if isinstance(error, AgentStopped) and attempt == 0 and self._moved(node_name):
                    continue
                raise error
            return answer
        raise AgentStopped(self.key)

    def _where(self) -> str:
        node = self.node
        if node is None:
            raise AgentStopped(self.key)
        return node

    def _moved(self, old: str) -> bool:
        node = self.node
        return node is not None and node != old

    def prompt(self, input: str | Message | Sequence[Message]) -> str:
        """Start a run with `input` on the agent's node; its run id.

        Raises: AgentBusy, TypeError, as `Agent.prompt`."""
        run_id: str = self._call("prompt", input)
        return run_id

    def continue_run(self) -> str:
        """`Agent.continue_run` on the node."""
        run_id: str = self._call("continue_run")
        return run_id

    def steer(self, message: str | Message, *, system_prompt: str | None = None) -> None:
        """`Agent.steer` on the node."""
        self._call("steer", message, system_prompt=system_prompt)

    def follow_up(self, message: str | Message, *, system_prompt: str | None = None) -> None:
        """`Agent.follow_up` on the node."""
        self._call("follow_up", message, system_prompt=system_prompt)

    def abort(self, reason: str = "user_abort") -> bool:
        """`Agent.abort` on the node; False if no run was running."""
        aborted: bool = self._call("abort", reason)
        return aborted

    def state(self) -> AgentState:
        """`Agent.state()`, taken on the node (its model and tools travel back pickled)."""
        state: AgentState = self._call("state")
        return state

    def wait_for_idle(self, timeout: float | None = None) -> None:
        """`Agent.wait_for_idle` on the node.

        Raises: TimeoutError, as `Agent.wait_for_idle`."""
        wait = CALL_TIMEOUT if timeout is None else timeout + CALL_TIMEOUT
        self._call("wait_for_idle", timeout, timeout=wait)

    def reset(self) -> None:
        """`Agent.reset` on the node."""
        self._call("reset")

    def set_system_prompt(self, prompt: str) -> None:
        """`Agent.set_system_prompt` on the node."""
        self._call("set_system_prompt", prompt)

    def set_model(self, model: Any) -> None:
        """`Agent.set_model` on the node (the model travels pickled)."""
        self._call("set_model", model)

    def set_tools(self, tools: Sequence[Any]) -> None:
        """`Agent.set_tools` on the node (the tools travel pickled)."""
        self._call("set_tools", list(tools))

    def run(
        self,
        input: str | Message | Sequence[Message],
        timeout: float | None = None,
        *,
        output_type: Any = None,
        output_retries: int | None = None,
    ) -> RunResult:
        """`Agent.run` on the node: prompt and wait for the run's end.

        Raises:
            RunFailed: the run failed, `reason="node_lost"` when its node was lost mid-run.
            AgentBusy, RunCanceled, OutputValidationError, TimeoutError: as `Agent.run`.
        """
        kwargs = {"output_type": output_type, "output_retries": output_retries}
        wait = None if timeout is None else timeout + CALL_TIMEOUT
        # No retry on a node failure: the run may have been running there (node_lost).
        result: RunResult = self._invoke("run", (self.key, input, timeout, kwargs), wait, False)
        return result

    def stream(self, input: str | Message | Sequence[Message]) -> Iterator[Event]:
        """Subscribe, prompt, and yield this run's events until its end (inclusive); a node
        loss ends it with `Error(reason="node_lost")`."""
        with self.subscribe() as sub:
            run_id = self.prompt(input)
            sub.expect(run_id)
            for event in sub.until_end(run_id=run_id):
                # Subscribed before the start: the end of this agent's run before it may come.
                if event.agent == self.key and event.run_id != run_id:
                    continue
                yield event

    def subscribe(
        self,
        max_queue: int = 1000,
        overflow: OverflowPolicy = "block",
        block_timeout: float = 30.0,
    ) -> ClusterSubscription:
        """A bounded subscription to every event of this agent, forwarded in order from its
        node in batches (see `ClusterSubscription`).

        Raises:
            ValueError: `max_queue < 1`, an unknown policy or `block_timeout <= 0`.
        """
        sub = ClusterSubscription(
            self._cluster,
            self.key,
            max_queue=max_queue,
            overflow=overflow,
            block_timeout=block_timeout,
        )
        self._cluster._opened(sub)
        return sub

    def stop(self) -> None:
        """Stop the agent on its node; idempotent."""
        self._cluster._stop_agent(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClusterAgent) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"<ClusterAgent {tuple(self.key)} node={self._node}>"
