"""WorkflowHost: what workflows need of the runtime they run in (a Protocol, so this package
never imports the runtime; `Runtime` provides it)."""

from __future__ import annotations

from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar, Unpack

from agent_runtime._key import AgentKey
from agent_runtime.agent import Agent, AgentOptionsDict
from agent_runtime.memory import SessionMemory
from agent_runtime.registry import AgentRegistry
from supervisors import AsyncTaskSupervisor

T = TypeVar("T")


class WorkflowHost(Protocol):
    """The runtime as its workflows see it."""

    @property
    def name(self) -> str: ...
    @property
    def registry(self) -> AgentRegistry[Any]: ...
    @property
    def memory(self) -> SessionMemory: ...
    @property
    def loop_tasks(self) -> AsyncTaskSupervisor: ...

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Run `coro` as a supervised task on the runtime's event loop."""
        ...

    async def astart_agent(
        self,
        key: AgentKey | tuple[str, str, int],
        *,
        output_type: object = None,
        on_failure: None = None,
        **options: Unpack[AgentOptionsDict],
    ) -> Agent[Any]:
        """Start an agent under `key` without blocking the loop."""
        ...
