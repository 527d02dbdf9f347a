"""Transcript checks run before every model call: every tool call paired with exactly one result."""

from __future__ import annotations

from collections.abc import Iterable, KeysView, Sequence

from agent_runtime.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)


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
    state = TranscriptState()
    state.feed(messages)
    return state.violations()


class TranscriptState:
    """`validate_transcript` kept up to date message by message, so a transcript that grows is
    checked in time proportional to what was added, not to its length.

    `feed(messages)` checks the messages that follow those already fed; `violations()` is what
    `validate_transcript` would say of everything fed so far. `vision` tells whether any fed
    message carries an image. `copy()` is cheap (the state, not the messages). Not
    thread-safe: one owner at a time (the agent's actor, then the run it hands a copy to).
    """

    __slots__ = ("_answered", "_first_use", "_open", "_open_at", "_violations", "count", "vision")

    def __init__(self) -> None:
        self.count = 0  # messages fed
        self.vision = False
        # A tuple, replaced when one is found (rarely): shared by copies, and no object for
        # the cyclic collector to walk in each idle agent (an empty list is one).
        self._violations: tuple[str, ...] = ()
        self._first_use: dict[str, int] = {}
        self._open: dict[str, ToolCall] = {}
        self._open_at: int | None = None
        self._answered: dict[str, int] = {}

    def copy(self) -> TranscriptState:
        other = TranscriptState.__new__(TranscriptState)
        other.count, other.vision = self.count, self.vision
        other._violations = self._violations
        other._first_use = dict(self._first_use)
        other._open, other._open_at = dict(self._open), self._open_at
        other._answered = dict(self._answered)
        return other

    def feed(self, messages: Iterable[Message]) -> None:
        for message in messages:
            index = self.count
            self.count += 1
            if isinstance(message, AssistantMessage):
                self._close(index)
                self._open, self._open_at, self._answered = {}, index, {}
                for call in message.tool_calls:
                    if call.id in self._first_use:
                        self._violations += (
                            f"duplicate tool-call id: {call.id!r} ({call.name}) in message "
                            f"{index} was already used in message {self._first_use[call.id]}",
                        )
                    else:
                        self._first_use[call.id] = index
                    self._open.setdefault(call.id, call)
                continue
            if isinstance(message, ToolResultMessage):
                self._result(index, message)
            if not self.vision and isinstance(message, UserMessage | ToolResultMessage):
                content = message.content
                if not isinstance(content, str):
                    self.vision = any(isinstance(b, ImageContent) for b in content)

    def _result(self, index: int, message: ToolResultMessage) -> None:
        call_id = message.tool_call_id
        if call_id not in self._open:
            if self._open_at is None:
                where = "there is no assistant message before it"
            else:
                where = f"it is not a call of the preceding assistant message {self._open_at}"
            self._violations += (
                f"orphan tool result: message {index} answers tool call {call_id!r} "
                f"({message.tool_name}), but {where}",
            )
        elif call_id in self._answered:
            self._violations += (
                f"duplicate tool result: message {index} is a second result for tool call "
                f"{call_id!r} (the first is message {self._answered[call_id]})",
            )
        else:
            self._answered[call_id] = index

    def _unpaired(self, until: int | None) -> list[str]:
        where = f"message {until} (the next assistant message)" if until is not None else "the end"
        return [
            f"unpaired tool call: {call_id!r} ({call.name}) in message {self._open_at} "
            f"has no result before {where}"
            for call_id, call in self._open.items()
            if call_id not in self._answered
        ]

    def _close(self, until: int) -> None:
        unpaired = self._unpaired(until)
        if unpaired:
            self._violations += tuple(unpaired)

    @property
    def call_ids(self) -> KeysView[str]:
        """The tool-call ids of the messages fed so far (a live view, O(1) lookups)."""
        return self._first_use.keys()

    def violations(self) -> list[str]:
        """The violations of the messages fed so far, as `validate_transcript` words them."""
        return [*self._violations, *self._unpaired(None)]
