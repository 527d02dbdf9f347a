"""Transcript checks run before every model call: every tool call paired with exactly one result."""

from __future__ import annotations

from collections.abc import Sequence

from agent_runtime.messages import AssistantMessage, Message, ToolCall, ToolResultMessage


def validate_transcript(messages: Sequence[Message]) -> list[str]:
    """The tool-call pairing violations of `messages`, as readable sentences; `[]` when valid.

    Rules (message numbers in the sentences are 0-based positions in `messages`):
    - unpaired tool call: every tool call of an assistant message needs a `ToolResultMessage`
      with its id before the next assistant message (or the end of the transcript);
    - duplicate tool result: a second result for the same call;
    - orphan tool result: a result whose id is not a call of the preceding assistant message
      (a late result for an older call counts as orphan too);
    - duplicate tool-call id: an id used by more than one call in the whole transcript.
    User messages between a call and its result are allowed. Results may come in any order.
    Each sentence starts with the rule's name, so callers can classify it.
    """
    violations: list[str] = []
    first_use: dict[str, int] = {}  # call id -> the message that first used it
    open_calls: dict[str, ToolCall] = {}  # the calls of the latest assistant message
    open_at: int | None = None
    answered: dict[str, int] = {}  # call id -> the message holding its result

    def close(until: int | None) -> None:
        where = f"message {until} (the next assistant message)" if until is not None else "the end"
        for call_id, call in open_calls.items():
            if call_id not in answered:
                violations.append(
                    f"unpaired tool call: {call_id!r} ({call.name}) in message {open_at} "
                    f"has no result before {where}"
                )

    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            close(index)
            open_calls, open_at, answered = {}, index, {}
            for call in message.tool_calls:
                if call.id in first_use:
                    violations.append(
                        f"duplicate tool-call id: {call.id!r} ({call.name}) in message {index} "
                        f"was already used in message {first_use[call.id]}"
                    )
                else:
                    first_use[call.id] = index
                open_calls.setdefault(call.id, call)
        elif isinstance(message, ToolResultMessage):
            call_id = message.tool_call_id
            if call_id not in open_calls:
                if open_at is None:
                    where = "there is no assistant message before it"
                else:
                    where = f"it is not a call of the preceding assistant message {open_at}"
                violations.append(
                    f"orphan tool result: message {index} answers tool call {call_id!r} "
                    f"({message.tool_name}), but {where}"
                )
            elif call_id in answered:
                violations.append(
                    f"duplicate tool result: message {index} is a second result for tool call "
                    f"{call_id!r} (the first is message {answered[call_id]})"
                )
            else:
                answered[call_id] = index
    close(None)
    return violations
