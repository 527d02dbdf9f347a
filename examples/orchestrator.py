"""An orchestrator that delegates to two subagents at once and answers from their reports.

    python examples/orchestrator.py

The orchestrator's model (scripted) asks for two `delegate` calls in one answer; with
`parallel_safe=True` both subagents (a researcher and a critic of the orchestrator's session)
run at the same time. Each subagent's model is a `FunctionModel` that answers from the task
it was given. The orchestrator's stream carries the subagents' events too, tagged with their
own keys, so one subscriber sees the whole tree at work. Offline: no key, no network.
"""

from __future__ import annotations

from agent_runtime import AgentEnd, AgentStart, Runtime, ToolExecutionEnd, delegate
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.llm import ChatRequest
from agent_runtime.messages import AssistantMessage, TextContent, ToolCall, UserMessage
from agent_runtime.testing import FunctionModel, ScriptedModel, ScriptedTurn


def subagent_answer(request: ChatRequest) -> str:
    """A subagent's reply: its role (from the system prompt) and the task it was given."""
    task = next(m.text for m in reversed(request.messages) if isinstance(m, UserMessage))
    return f"[{request.system}] done: {task}"


def main() -> None:
    orchestrator_model = ScriptedModel(
        [
            ScriptedTurn(
                tool_calls=[
                    ToolCall(
                        id="d1",
                        name="delegate",
                        arguments={"role": "researcher", "task": "list the facts"},
                    ),
                    ToolCall(
                        id="d2",
                        name="delegate",
                        arguments={"role": "critic", "task": "find the weak points"},
                    ),
                ]
            ),
            "Both reports are in: the facts hold, with two weak points.",
        ]
    )
    team = delegate(
        ["researcher", "critic"],
        parallel_safe=True,  # both calls of one answer run at once, each on its own subagent
        model=FunctionModel(subagent_answer),
        system_prompt="a subagent",
    )
    with Runtime.start(config=RuntimeConfig(memory=MemoryConfig(store="memory"))) as runtime:
        orchestrator = runtime.start_agent(
            ("review-1", "orchestrator", 0),
            model=orchestrator_model,
            system_prompt="You split the work and summarise.",
            tools=[team],
        )
        answer = ""
        for event in orchestrator.stream("Review the proposal"):
            who = f"{event.agent.role}#{event.agent.index}" if event.agent else "-"
            if isinstance(event, ToolExecutionEnd):
                text = "".join(c.text for c in event.result.content if isinstance(c, TextContent))
                print(f"{who:16} {event.name} -> {text}")
            elif isinstance(event, AgentStart):
                print(f"{who:16} started")
            elif isinstance(event, AgentEnd):  # the last one is the orchestrator's own
                replies = [m for m in event.new_messages if isinstance(m, AssistantMessage)]
                answer = replies[-1].text if replies else ""
                print(f"{who:16} ended")
        print("answer:", answer)
        roles = sorted(a.key.role for a in runtime.subagents.list())
        print("agents now:", ", ".join(roles))
        assert roles == ["critic", "orchestrator", "researcher"], roles


if __name__ == "__main__":
    main()
