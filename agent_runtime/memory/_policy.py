"""How an agent uses session memory: the read/write policy and the last-n window of a history."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent_runtime.messages import AssistantMessage, Message, ToolResultMessage


class MemoryPolicy(BaseModel):
    """Whether an agent reads its session's history into its context, writes its new messages to
    it, and how many of the newest stored messages it reads (`last_n`, None for all).

    Frozen and JSON round-trippable. `last_n` is applied by the reader with `window`, never by
    the store: the stored history stays whole.

    Raises:
        pydantic.ValidationError: (a `ValueError`) `last_n` is not None or an int >= 1.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    read: bool = True
    write: bool = True
    last_n: int | None = Field(None, ge=1)

    @classmethod
    def none(cls) -> MemoryPolicy:
        """Neither read nor write: the agent's history lives in the agent only."""
        return cls(read=False, write=False)

    @classmethod
    def read_only(cls) -> MemoryPolicy:
        """Read the session's history; keep the agent's new messages to itself."""
        return cls(read=True, write=False)

    @classmethod
    def write_only(cls) -> MemoryPolicy:
        """Start from an empty context; record the agent's new messages in the session."""
        return cls(read=False, write=True)

    @classmethod
    def limited_window(cls, n: int) -> MemoryPolicy:
        """Read and write, reading only a window of the newest `n` stored messages.

        Raises:
            ValueError: `n` is not an int >= 1.
        """
        _check_last_n(n)
        return cls(read=True, write=True, last_n=n)


def window(messages: Sequence[Message], last_n: int | None) -> list[Message]:
    """The newest `last_n` messages (all when None), without results whose call was cut off.

    The window is the last `last_n` messages minus every tool result that does not answer a
    call of the latest assistant message before it inside the window: a window never starts in
    the middle of a tool-call unit, so no result reaches the model without its call.

    Guarantees: the result is a subsequence of `messages[-last_n:]` in the original order, so it
    holds at most `last_n` messages; every tool call in it keeps the results that follow it; a
    transcript that passes `agent_runtime.loop.validate_transcript` still does.
    (`agent_runtime.context.truncate` is not used: it keeps whole units, pinning the newest
    even past the limit, while `last_n` is a hard bound on what is read.)

    Raises:
        ValueError: `last_n` is not None or an int >= 1.
    """
    if last_n is None:
        return list(messages)
    _check_last_n(last_n)
    kept: list[Message] = []
    open_calls: set[str] = set()  # the calls of the latest assistant message in the window
    for message in messages[-last_n:]:
        if isinstance(message, AssistantMessage):
            open_calls = {call.id for call in message.tool_calls}
        elif isinstance(message, ToolResultMessage) and message.tool_call_id not in open_calls:
            continue
        kept.append(message)
    return kept


def _check_last_n(n: Any) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"invalid last_n {n!r} (expected an int >= 1)")
