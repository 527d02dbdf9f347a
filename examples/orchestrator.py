"""An orchestrator that delegates to two subagents at once and answers from their reports.

    python examples/orchestrator.py

The orchestrator's model (scripted) asks for two `delegate` calls in one answer; with
`parallel_safe=True` both subagents (a researcher and a critic of the orchestrator's session)
run at the same time. Each subagent's model is a `FunctionModel` that answers from the task
it was given. The orchestrator's stream carries the subagents' events too, tagged with their
own keys, so one subscriber sees the whole tree at work. Then both subagents are handed a
long task at once, and one `abort()` of the orchestrator aborts the three runs together: each
ends with `Canceled`, and every transcript stays valid. Offline: no key, no network.
"""

from __future__ import annotations

from agent_runtime import (
    AgentEnd,
    AgentStart,
    Canceled,
    MessageUpdate,
    Runtime,
    ToolExecutionEnd,
    delegate,
)
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.llm import ChatRequest
from agent_runtime.loop import validate_transcript
from agent_runtime.messages import AssistantMessage, TextContent, ToolCall, UserMessage
from agent_runtime.testing import FunctionModel, ScriptedModel, ScriptedTurn


def subagent_answer(request: ChatRequest) -> str | ScriptedTurn:
    """A subagent's reply: its role (from the system prompt) and the task it was given; a
    long task streams for a minute, one word every 0.3 s."""
    task = next(m.text for m in reversed(request.messages) if isinstance(m, UserMessage))
    if task.startswith("read every"):
        return ScriptedTurn(chunks=["reading "] * 200, chunk_delay=0.3)
    return f"[{request.system}] done: {task}"


def delegate_both(first: str, second: str) -> ScriptedTurn:
    """An orchestrator's answer calling `delegate` twice: the researcher, then the critic."""
    return ScriptedTurn(
        tool_calls=[
            ToolCall(
                id=f"{first[:4]}-r",
                name="delegate",
                arguments={"role": "researcher", "task": first},
            ),
            ToolCall(
                id=f"{second[:4]}-c", name="delegate", arguments={"role": "critic", "task": second}
            ),
        ]
    )


def main() -> None:
    orchestrator_model = ScriptedModel(
        [
            delegate_both("list the facts", "find the weak points"),
            "Both reports are in: the facts hold, with two weak points.",
            delegate_both("read every source", "read every review"),  # the long tasks
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

        # Both subagents at work at once; one abort of the orchestrator ends all three runs.
        streaming: set[str] = set()
        aborted = False
        canceled: list[str] = []
        for event in orchestrator.stream("Now read everything"):
            role = event.agent.role if event.agent else "-"
            if isinstance(event, MessageUpdate) and role != "orchestrator" and not aborted:
                streaming.add(role)
                if streaming == {"researcher", "critic"}:  # both streaming: abort the top
                    aborted = orchestrator.abort()
                    print("both subagents streaming; abort() ->", aborted)
            elif isinstance(event, Canceled):
                canceled.append(f"{role} ({event.reason})")
        print("canceled:", ", ".join(sorted(canceled)))
        agents = runtime.subagents.list()
        for agent in agents:
            agent.wait_for_idle(timeout=10)
        valid = all(not validate_transcript(a.state().messages) for a in agents)
        print("all idle, every transcript valid:", valid)


if __name__ == "__main__":
    main()
