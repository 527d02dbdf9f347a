"""AgentHost: what an agent needs of the runtime it runs in (a Protocol, so agents never import
the runtime; `Runtime` provides it)."""

from __future__ import annotations

from typing import Any, Protocol

from agent_runtime._counters import RuntimeCounters
from agent_runtime._key import AgentKey
from agent_runtime.abort import AbortTable
from agent_runtime.config import RuntimeConfig
from agent_runtime.llm.base import ChatModel
from agent_runtime.loop import LoopHost
from agent_runtime.memory import SessionMemory, SessionWriter
from agent_runtime.registry import AgentRegistry
from agent_runtime.tools import ToolRegistry
from supervisors import AsyncTaskSupervisor, TaskSupervisor


class AgentHost(LoopHost, Protocol):
    """The runtime as its agents see it (also the host of their runs' loops)."""

    @property
    def config(self) -> RuntimeConfig: ...
    @property
    def registry(self) -> AgentRegistry[Any]: ...
    @property
    def abort_table(self) -> AbortTable: ...
    @property
    def tools(self) -> ToolRegistry: ...
    @property
    def memory(self) -> SessionMemory: ...
    @property
    def memory_writer(self) -> SessionWriter: ...
    @property
    def loop_tasks(self) -> AsyncTaskSupervisor: ...
    @property
    def tool_tasks(self) -> TaskSupervisor: ...
    @property
    def stopping(self) -> bool: ...
    @property
    def counters(self) -> RuntimeCounters: ...

    def spawn_subagent(self, parent: Any, role: str, options: dict[str, Any]) -> Any:
        """Start a subagent of `parent` (an Agent) in its session; returns its Agent."""
        ...

    async def aspawn_subagent(self, parent: Any, role: str, options: dict[str, Any]) -> Any:
        """`spawn_subagent` awaited: in place on the runtime's loop, else on a worker thread."""
        ...

    def stop_agent(self, agent: Any) -> bool:
        """Stop `agent` (an Agent) and its subagents."""
        ...

    async def astop_agent(self, agent: Any) -> bool:
        """`stop_agent` awaited: in place on the runtime's loop, else on a worker thread."""
        ...

    def model_for_run(self, key: AgentKey, model: ChatModel) -> ChatModel:
        """The model a run of the agent under `key` starts with (`model` unless overridden)."""
        ...
