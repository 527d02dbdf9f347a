"""One agent: the `Agent` handle users hold, the `AgentActor` that owns its state, the run
driver, `AgentOptions` and the `delegate` tool."""

from agent_runtime._errors import AgentStopped
from agent_runtime.agent._actor import AgentActor
from agent_runtime.agent._delegate import delegate
from agent_runtime.agent._handle import Agent
from agent_runtime.agent._host import AgentHost
from agent_runtime.agent._options import AgentOptions, AgentOptionsDict
from agent_runtime.agent._run_events import RunEvents
from agent_runtime.agent._state import AgentState, RunResult, run_result

__all__ = [
    "Agent",
    "AgentActor",
    "AgentHost",
    "AgentOptions",
    "AgentOptionsDict",
    "AgentState",
    "AgentStopped",
    "RunEvents",
    "RunResult",
    "delegate",
    "run_result",
]
