"""Subagents: the runtime's DynamicSupervisor of agents, as a facade keyed by AgentKey."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, get_args

import pykka
import structlog

from agent_runtime._errors import AlreadyRegistered
from agent_runtime._key import AgentKey
from agent_runtime.agent._core import AgentCore
from agent_runtime.agent._handle import Agent, AgentActor
from agent_runtime.config import QueueMode, ThinkingLevel
from agent_runtime.llm.base import ChatModel
from agent_runtime.loop.types import RetryPolicy
from agent_runtime.memory import MemoryPolicy
from agent_runtime.tools import Tool, ToolRegistry, check_unique
from supervisors import ChildSpec, ChildStartError

if TYPE_CHECKING:
    from agent_runtime.runtime._runtime import Runtime

log = structlog.get_logger(__name__)

OPTION_NAMES = (
    "model",
    "system_prompt",
    "tools",
    "steering_mode",
    "follow_up_mode",
    "max_tool_concurrency",
    "max_tool_turns",
    "tool_timeout",
    "retry",
    "memory",
    "restart",
    "thinking_level",
    "tool_registry",
    "abort_grace",
)


def agent_options(runtime: Runtime, options: dict[str, Any]) -> dict[str, Any]:
    """Complete `options` with the config defaults and check them.

    Raises:
        TypeError: an unknown option (named), a model that is not a ChatModel, tools that
            are not Tools.
        ValueError: a value out of range (named).


    `memory`: a MemoryPolicy; None (the default) takes `[memory]` of the config
    (read and write the session's history: durable with the default SQLite store).
    """
    unknown = sorted(set(options) - set(OPTION_NAMES))
    if unknown:
        raise TypeError(
            f"unknown agent option(s) {', '.join(map(repr, unknown))} "
            f"(expected some of: {', '.join(OPTION_NAMES)})"
        )
    cfg = runtime.config.agent
    retry = runtime.config.retry
    out: dict[str, Any] = {
        "system_prompt": "",
        "tools": [],
        "steering_mode": cfg.steering_mode,
        "follow_up_mode": cfg.follow_up_mode,
        "max_tool_concurrency": cfg.max_tool_concurrency,
        "max_tool_turns": cfg.max_tool_turns,
        "tool_timeout": cfg.tool_timeout,
        "retry": RetryPolicy(**retry.model_dump()),
        "memory": None,
        "restart": cfg.restart,
        "thinking_level": cfg.thinking_level,
        "tool_registry": None,
        "abort_grace": cfg.abort_grace,
        **options,
    }
    if "model" not in options:
        from agent_runtime.llm.factory import from_config

        out["model"] = from_config(config=runtime.config)
    if not isinstance(out["model"], ChatModel):
        raise TypeError(f"model must be a ChatModel, not {type(out['model']).__name__}")
    tools = list(out["tools"])
    if not all(isinstance(t, Tool) for t in tools):
        raise TypeError("tools must be agent_runtime.Tool objects (decorate functions with @tool)")
    check_unique(tools)
    out["tools"] = tools
    if out["tool_registry"] is True:
        out["tool_registry"] = runtime.tools
    elif out["tool_registry"] is not None and not isinstance(out["tool_registry"], ToolRegistry):
        raise TypeError("tool_registry must be True, None or a ToolRegistry")
    for name in ("steering_mode", "follow_up_mode"):
        if out[name] not in get_args(QueueMode):
            raise ValueError(f"unknown {name} {out[name]!r} (expected one of: one_at_a_time, all)")
    if out["restart"] not in ("temporary", "transient"):
        raise ValueError(f"unknown restart {out['restart']!r} (expected temporary or transient)")
    if out["thinking_level"] not in get_args(ThinkingLevel):
        raise ValueError(f"unknown thinking_level {out['thinking_level']!r}")
    for name in ("max_tool_concurrency", "max_tool_turns"):
        if isinstance(out[name], bool) or not isinstance(out[name], int) or out[name] < 1:
            raise ValueError(f"invalid {name} {out[name]!r} (expected an int >= 1)")
    if not isinstance(out["retry"], RetryPolicy):
        raise TypeError("retry must be a RetryPolicy")
    memory = out["memory"]
    if memory is None:
        mem = runtime.config.memory
        out["memory"] = MemoryPolicy(read=mem.read, write=mem.write, last_n=mem.last_n)
    elif memory is False:
        out["memory"] = MemoryPolicy.none()
    elif not isinstance(memory, MemoryPolicy):
        raise TypeError(f"memory must be a MemoryPolicy, not {type(memory).__name__}")
    return out


class Subagents:
    """Start, stop and list the agents of one runtime (all run under its `subagents`
    DynamicSupervisor). Agents are `temporary` by default: a crash is not restarted and never
    touches siblings; `restart="transient"` restarts a crashed agent under the same key with
    its history."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def start(self, key: AgentKey | tuple[str, str, int], **options: Any) -> Agent:
        """Start an agent under `key`.

        Raises:
            AlreadyRegistered: a live agent holds the key (`.holder` is its Agent).
            ValueError: an invalid key or option value; TypeError: an unknown option.
        """
        return self._start(AgentKey.of(key), options, parent=None)

    def _start(self, key: AgentKey, options: dict[str, Any], parent: AgentCore | None) -> Agent:
        runtime = self._runtime
        holder = runtime.registry.lookup(key)
        if holder is not None:
            raise AlreadyRegistered(key, holder)
        opts = agent_options(runtime, options)
        core = AgentCore(key, runtime, opts)
        handle = Agent(core)
        if parent is not None:
            core.parent = parent
            parent.children.add(core)

        def start() -> pykka.ActorRef[Any]:
            return AgentActor.start(core, handle)

        spec = ChildSpec(
            id=f"agent:{key.session}/{key.role}/{key.index}",
            start=start,
            restart=opts["restart"],
            shutdown=runtime.config.supervision.shutdown,
        )
        try:
            runtime.subagents_supervisor.start_child(spec)
        except ChildStartError as exc:
            cause = exc.__cause__
            while cause is not None and not isinstance(cause, AlreadyRegistered):
                cause = cause.__cause__
            if isinstance(cause, AlreadyRegistered):
                raise cause from None
            raise
        log.info("agent.started", session=key.session, role=key.role, index=key.index)
        return handle

    def spawner(self, parent: AgentCore) -> Callable[..., Agent]:
        """`ToolContext.spawn` for tools of `parent`: the next free index of `role` in the
        parent's session, tied to the parent (stopped with it)."""

        def spawn(role: str, **options: Any) -> Agent:
            # A spawned subagent works from the task it is given, not from the whole session's
            # history, and its scratch work stays out of the session unless asked for.
            options.setdefault("memory", MemoryPolicy.none())
            session = parent.key.session
            for _ in range(100):
                index = self._runtime.registry.next_index(session, role)
                with contextlib.suppress(AlreadyRegistered):
                    return self._start(AgentKey(session, role, index), options, parent=parent)
            raise AlreadyRegistered(AgentKey(session, role, -1), None)

        return spawn

    def stop(self, agent_or_key: Agent | AgentKey | tuple[str, str, int]) -> bool:
        """Stop an agent (its run aborted, its spawned subagents stopped first); False if no
        such agent was running."""
        agent = self._resolve(agent_or_key)
        if agent is None:
            return False
        for child in list(agent._core.children):
            child_handle = self._runtime.registry.lookup(child.key)
            if child_handle is not None:
                self.stop(child_handle)
        ref = agent._ref
        stopped = ref is not None and self._runtime.subagents_supervisor.terminate_child(ref)
        agent._core.shutdown("agent_stopped")
        return stopped

    def _resolve(self, agent_or_key: Agent | AgentKey | tuple[str, str, int]) -> Agent | None:
        if isinstance(agent_or_key, Agent):
            return agent_or_key
        found = self._runtime.registry.lookup(AgentKey.of(agent_or_key))
        return found if isinstance(found, Agent) else None

    def list(self) -> list[Agent]:
        """Every live agent, sorted by key."""
        return [a for _, a in self._runtime.registry.list() if isinstance(a, Agent)]

    def count(self) -> int:
        """How many agents are live."""
        return len(self.list())

    def stop_all(self) -> int:
        """Stop every agent; returns how many were stopped."""
        return sum(1 for agent in self.list() if self.stop(agent))
