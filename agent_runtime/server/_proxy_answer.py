"""The answer of a finished run, as the protocol endpoints report it."""

from __future__ import annotations

from agent_runtime.events import AgentEnd
from agent_runtime.messages import AssistantMessage

__all__ = ["final_text"]


def final_text(end: AgentEnd) -> str:
    """The text of the run's last assistant message ("" when it made none)."""
    for message in reversed(end.new_messages):
        if isinstance(message, AssistantMessage):
            return message.text
    return ""
