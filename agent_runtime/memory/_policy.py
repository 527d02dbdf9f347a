"""How an agent uses session memory: the read/write policy and the window of a history it reads
(the newest `last_n` messages, at most `max_bytes`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent_runtime.memory._size import message_bytes
from agent_runtime.messages import AssistantMessage, Message, ToolResultMessage


class MemoryPolicy(BaseModel):
    """Whether an agent reads its session's history into its context, writes its new messages to
    it, and how much of the newest stored history it reads: at most `last_n` messages and at
    most `max_bytes` bytes of their JSON (None: no bound; both bounds hold together).

    Frozen and JSON round-trippable. The window is applied by the reader with `window`, never
    by the store: the stored history stays whole.

    Raises:
        pydantic.ValidationError: (a `ValueError`) `last_n` or `max_bytes` is not None or an
            int >= 1.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    read: bool = True
    write: bool = True
    last_n: int | None = Field(default=None, ge=1, strict=True)  # not True, not "5"
    max_bytes: int | None = Field(default=None, ge=1, strict=True)

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
    def limited_window(cls, n: int | None = None, *, max_bytes: int | None = None) -> MemoryPolicy:
        """Read and write, reading only a window of the newest stored history: at most `n`
        messages and at most `max_bytes` bytes (their JSON, UTF-8), either or both.

        Raises:
            ValueError: `n` or `max_bytes` is not None or an int >= 1, or both are None.
        """
        if n is None and max_bytes is None:
            raise ValueError(
                "limited_window needs n (last_n), max_bytes or both (no bound: MemoryPolicy())"
            )
        if n is not None:
            _check_last_n(n)
        if max_bytes is not None:
            _check_max_bytes(max_bytes)
        return cls(read=True, write=True, last_n=n, max_bytes=max_bytes)


def window(
    messages: Sequence[Message], last_n: int | None, max_bytes: int | None = None
) -> list[Message]:
    """The newest history within `last_n` messages and `max_bytes` bytes (each None: no bound),
    without results whose call was cut off.

    `last_n` takes the last `last_n` messages minus every tool result that does not answer a
    call of the latest assistant message before it inside the window: a window never starts in
    the middle of a tool-call unit, so no result reaches the model without its call.
    `max_bytes` then drops the oldest units (a user message; an assistant message with the
    results of its calls) until the JSON of what is left (UTF-8, `model_dump_json` of each
    message) fits; a unit is never split, so one newest unit larger than `max_bytes` leaves an
    empty window.

    Guarantees: the result is a subsequence of `messages[-last_n:]` in the original order, so it
    holds at most `last_n` messages and at most `max_bytes` bytes; what it leaves out of the
    newest `max_bytes` is only results whose call was cut off; every tool call in it keeps
    the results that follow it; a transcript that passes
    `agent_runtime.loop.validate_transcript` still does.
    (`agent_runtime.context.truncate` is not used: it is the model-context policy, while the
    window is a hard bound on what is read.)

    Raises:
        ValueError: `last_n` or `max_bytes` is not None or an int >= 1.
    """
    if last_n is not None:
        _check_last_n(last_n)
    kept = _answered_only(messages if last_n is None else messages[-last_n:])
    if max_bytes is None:
        return kept
    _check_max_bytes(max_bytes)
    # Results can follow their call after a message in between (steering): cutting at a unit
    # boundary may orphan one, which then goes too (the window only gets smaller).
    return _answered_only(_newest_units_within(kept, max_bytes))


def _answered_only(messages: Sequence[Message]) -> list[Message]:
    """`messages` minus every tool result that does not answer a call of the latest assistant
    message before it."""
    kept: list[Message] = []
    open_calls: set[str] = set()  # the calls of the latest assistant message so far
    for message in messages:
        if isinstance(message, AssistantMessage):
            open_calls = {call.id for call in message.tool_calls}
        elif isinstance(message, ToolResultMessage) and message.tool_call_id not in open_calls:
            continue
        kept.append(message)
    return kept


def _newest_units_within(messages: list[Message], max_bytes: int) -> list[Message]:
    start = len(messages)  # messages[start:] is the window so far: whole units only
    total = 0
    unit = 0  # bytes of the results met since the last unit boundary, walking backwards
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        unit += message_bytes((message,))
        if isinstance(message, ToolResultMessage):
            continue  # part of the unit its call opens, further back
        if total + unit > max_bytes:
            break
        total += unit
        unit = 0
        start = index
    return messages[start:]


def _check_last_n(n: Any) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"invalid last_n {n!r} (expected an int >= 1)")


def _check_max_bytes(n: Any) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"invalid max_bytes {n!r} (expected an int >= 1)")
