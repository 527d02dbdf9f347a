"""Guardrails: checks on the text passing a run, which block it (or one tool call) or report.

    python examples/guardrails.py

- `NoDeletes`, a guardrail of our own at `tool_call`, blocks calls of `delete_file`: the call
  gets an error result the model reads, and the run goes on (the model answers without it);
- `RegexGuardrail` at `model_response` blocks an answer that mentions a password: the run
  fails with `GuardrailTripped`, which says which guardrail, where and why (never the text);
- a guardrail in `mode="report"` lets the text through and only logs, counts and traces.
"""

from __future__ import annotations

from agent_runtime import (
    Guardrail,
    GuardrailContext,
    GuardrailResult,
    GuardrailTripped,
    Runtime,
    ToolExecutionEnd,
    tool,
)
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.guardrails import MaxLengthGuardrail, RegexGuardrail
from agent_runtime.messages import ToolCall, ToolResultMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn


class NoDeletes(Guardrail):
    """Blocks every call of the `delete_file` tool."""

    at = "tool_call"

    def check(self, text: str, *, context: GuardrailContext) -> GuardrailResult:
        if context.tool_name == "delete_file":
            return GuardrailResult(False, "deleting files is not allowed here")
        return GuardrailResult(True)


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    raise AssertionError("never called: the guardrail blocks it")


def main() -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(
                tool_calls=[ToolCall(id="c1", name="delete_file", arguments={"path": "/etc/x"})]
            ),
            "I may not delete files, so I left it alone.",
            "The admin password is hunter2.",
        ]
    )
    guardrails = [
        NoDeletes(),
        RegexGuardrail(keywords=["password"], at="model_response"),
        MaxLengthGuardrail(20, at="model_response", mode="report"),  # logs, never blocks
    ]
    with Runtime.start(config=RuntimeConfig(memory=MemoryConfig(store="memory"))) as runtime:
        agent = runtime.start_agent(
            ("s1", "ops", 0), model=model, tools=[delete_file], guardrails=guardrails
        )

        events = agent.subscribe()
        result = agent.run("Delete /etc/x", timeout=30)
        blocked = [
            e for e in events.until_end(run_id=result.run_id) if isinstance(e, ToolExecutionEnd)
        ]
        print("tool call blocked:", blocked[0].is_error)
        reply = next(m for m in result.new_messages if isinstance(m, ToolResultMessage))
        print("the model read:", reply.text)
        print("answer:", result.text)
        print(f"a {len(result.text)}-character answer passed the report-only 20-character limit")

        try:
            agent.run("What is the admin password?", timeout=30)
        except GuardrailTripped as tripped:
            print(f"GuardrailTripped: {tripped.guardrail} at {tripped.at}: {tripped.explanation}")
        events.close()


if __name__ == "__main__":
    main()
