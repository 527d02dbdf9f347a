"""A process that runs a runtime with a status socket, for the tests of `agent-runtime top`.

`python -m tests.agent_runtime.status_host SOCKET`: starts a runtime serving SOCKET with a
lead agent (transient) that delegated to a researcher, which is in its tool `hold`, and an
idle agent; prints `ready` once its own `tree()` shows that, then holds until stdin closes,
lets the tool finish, waits for the lead's answer and stops.
"""

from __future__ import annotations

import sys
import threading

from agent_runtime import Runtime, delegate, tool
from agent_runtime.config import MemoryConfig, RuntimeConfig, TelemetryConfig
from agent_runtime.messages import ToolCall
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until

LEAD = ("ops", "lead", 0)
RESEARCHER = ("ops", "researcher", 0)
IDLE = ("ops", "spare", 0)


def main(socket_path: str) -> int:
    release = threading.Event()

    @tool
    def hold() -> str:
        """Holds until the test lets go."""
        release.wait(60)
        return "held"

    config = RuntimeConfig(
        memory=MemoryConfig(store="memory"),
        telemetry=TelemetryConfig(log_level="warning", status_socket=socket_path),
    )
    researcher = ScriptedModel(
        [ScriptedTurn(tool_calls=[ToolCall(id="h1", name="hold", arguments={})]), "found it"]
    )
    lead_model = ScriptedModel(
        [
            ScriptedTurn(
                tool_calls=[
                    ToolCall(
                        id="d1",
                        name="delegate",
                        arguments={"role": "researcher", "task": "look"},
                    )
                ]
            ),
            "the answer",
        ]
    )
    with Runtime.start(config, name="status-host") as runtime:
        lead = runtime.start_agent(
            LEAD,
            model=lead_model,
            tools=[delegate(["researcher"], model=researcher, tools=[hold])],
            restart="transient",
        )
        runtime.start_agent(IDLE, model=ScriptedModel(["spare"]))
        lead.prompt("go")

        def delegated() -> bool:
            status = runtime.tree().agent(RESEARCHER)
            return status is not None and status.activity == "tool:hold"

        wait_until(delegated, timeout=30)
        print("ready", flush=True)
        sys.stdin.read()  # until the test closes our stdin
        release.set()
        lead.wait_for_idle(timeout=30)
        print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
