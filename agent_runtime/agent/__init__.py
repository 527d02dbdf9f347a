"""One agent: the `Agent` handle users hold and the `AgentActor` that owns its state."""

from agent_runtime._errors import AgentStopped
from agent_runtime.agent._delegate import delegate
from agent_runtime.agent._handle import Agent, AgentActor, AgentState, RunResult, run_result

__all__ = [
    "Agent",
    "AgentActor",
    "AgentState",
    "AgentStopped",
    "RunResult",
    "delegate",
    "run_result",
]
