"""What enters an agent's history and its session's memory, and how a history is repaired.

Prompts become messages (`as_messages`); a run's messages are kept or not, turn by turn
(`RunTranscript`); calls left unpaired by a cut-off run get `outcome="unknown"` results
(`pair_dangling_calls`, `repaired`); a prompt accepted is kept in session state until its
turn commits (`pending_prompt_key`, `with_pending_prompt`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from agent_runtime.loop._approval import replace_amended, with_edited_args
from agent_runtime.messages import (
    AssistantMessage,
    Message,
    MessageAdapter,
    TextContent,
    ToolResultMessage,
    UserMessage,
)

MESSAGE_TYPES = (UserMessage, AssistantMessage, ToolResultMessage)


def as_messages(value: str | Message | Sequence[Message]) -> list[Message]:
    """A prompt as messages: a str becomes one UserMessage.

    Raises:
        TypeError: anything else than a str, a message or a list of messages.
    """
    if isinstance(value, str):
        return [UserMessage(content=value)]
    if isinstance(value, MESSAGE_TYPES):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(m, MESSAGE_TYPES) for m in value):
        return list(value)
    raise TypeError(f"expected a str, a Message or a list of Messages, not {type(value).__name__}")


def unknown_result(call_id: str, name: str, reason: str) -> ToolResultMessage:
    """The result of a call whose outcome nobody knows (its run was cut off)."""
    return ToolResultMessage(
        tool_call_id=call_id,
        tool_name=name,
        content=[TextContent(text=f"Not completed: the run ended ({reason}).")],
        details={"outcome": "unknown", "cancelled": True},
        is_error=True,
    )


def pair_dangling_calls(messages: Iterable[Message], reason: str) -> list[Message]:
    """Results for the tool calls of `messages` left without one (a run cut off by a crash or
    a stopped loop), to be appended so the history stays a valid transcript."""
    messages = list(messages)
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)}
    return [
        unknown_result(call.id, call.name, reason)
        for message in messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
        if call.id not in answered
    ]


def repaired(messages: Sequence[Message], reason: str) -> list[Message]:
    """`messages` with an `outcome="unknown"` result inserted after each assistant message's
    results for every call of it left unpaired (a history rebuilt after a crash)."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)}
    out: list[Message] = []
    missing: list[Message] = []
    for message in messages:
        if missing and not isinstance(message, ToolResultMessage):
            out.extend(missing)
            missing = []
        out.append(message)
        if isinstance(message, AssistantMessage):
            missing = [
                unknown_result(c.id, c.name, reason)
                for c in message.tool_calls
                if c.id not in answered
            ]
    out.extend(missing)
    return out


class RunTranscript:
    """What one run adds to its agent's history and to its session's memory: the one place
    that decides it.

    - A message the run ends (`MessageEnd`) enters the history, unless it is an assistant
      answer that failed or was aborted (`stop_reason` `error` or `aborted`): such an attempt
      is announced to subscribers but never committed, and its tool calls never run.
      Prompts, steering and follow-ups enter as the user messages the run delivers.
    - Session memory gets the run's messages turn by turn (`turn_ended`): an assistant
      message with its tool results, after the user messages that led to it, as one batch.
    - A run cut off (abort, crash, a lost loop) leaves every call of its answers paired:
      `dangling(reason)` gives an `outcome="unknown"` result for each call left unanswered,
      committed with the run's last batch.
    """

    def __init__(self, carried: Sequence[Message] = ()) -> None:
        # The turn being assembled, for session memory: the first starts with what the run
        # carries (the end of its history not in memory yet: a crashed incarnation's kept
        # prompt), so it is stored in its place, and a turn parked for approvals keeps it.
        self.unit: list[Message] = list(carried)
        self.messages: list[Message] = []  # every message the run committed

    def ended(self, message: Message) -> bool:
        """A message the run ended: True (and kept) if it enters the history."""
        if isinstance(message, AssistantMessage) and message.stop_reason in ("error", "aborted"):
            return False
        self.unit.append(message)
        self.messages.append(message)
        return True

    def amend(self, call_id: str, args: dict[str, Any]) -> tuple[Message, Message] | None:
        """A human approved call `call_id` with `args` in place of the model's: the answer
        that made the call is kept with them (in the history and in its turn's batch, not
        yet stored), so the model reads the call that ran. The answer as it was and as it
        is now; None when nothing changed."""
        for old in reversed(self.messages):
            if isinstance(old, AssistantMessage) and any(c.id == call_id for c in old.tool_calls):
                new = with_edited_args(old, call_id, args)
                if new is old:
                    return None
                replace_amended(self.messages, old, new)
                replace_amended(self.unit, old, new)
                return old, new
        return None

    def turn_ended(self) -> list[Message]:
        """The batch of the turn that just ended, for session memory (maybe empty)."""
        unit, self.unit = self.unit, []
        return unit

    def dangling(self, reason: str) -> list[Message]:
        """Results for the calls the run left unanswered; queued for the last batch."""
        pairs = pair_dangling_calls(self.messages, reason)
        self.unit.extend(pairs)
        return pairs


# -- a prompt accepted is a prompt kept ---------------------------------------------------------

PENDING_PROMPTS = "agent_runtime.pending_prompts"
"""The reserved session whose key-value state keeps each agent's accepted prompt until its
turn commits (no history of its own; out of the sessions' own state)."""


def pending_prompt_key(session: str, role: str, index: int) -> str:
    """The key under which the agent `(session, role, index)` keeps its pending prompt."""
    return json.dumps([session, role, index])


def with_pending_prompt(
    messages: list[Message], pending: object, reason: str
) -> tuple[list[Message], tuple[Message, ...]]:
    """`messages` (an agent's history, as stored) followed by the prompt it had accepted but
    whose turn never committed (a crash during the run), if `pending` holds one; and that
    prompt (empty when none was appended): it is in the history, not yet in the session's
    memory, and the agent's next run commits it with its first turn."""
    if not isinstance(pending, list) or not pending:
        return messages, ()
    prompt = [MessageAdapter.validate_python(m) for m in pending]
    size = len(prompt)
    for start in range(len(messages) - size, -1, -1):
        if messages[start : start + size] == prompt:
            return messages, ()  # committed with its turn after all
    return repaired([*messages, *prompt], reason), tuple(prompt)
