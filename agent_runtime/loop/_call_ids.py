"""Tool-call ids a transcript can be sent again with: unique across the whole transcript.

Providers that omit ids (the builder then names calls `call_0`, `call_1`, ...) or reuse them
in every response (`call_0` each time, `functions.read:0`) would put a second call with the
same id into the transcript, which every later call then fails to send (`invalid_transcript`).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Collection, Iterable

from agent_runtime.messages import AssistantMessage, Message, ToolCall

_NOT_ID = re.compile(r"[^A-Za-z0-9_-]")
_STEM = 24  # characters of the old id kept in a fresh one


def call_ids_in(messages: Iterable[Message]) -> set[str]:
    """The ids of every tool call in `messages` (a full scan: for callers without a
    `TranscriptState` that already knows them)."""
    return {
        call.id
        for message in messages
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    }


def unique_call_ids(message: AssistantMessage, taken: Collection[str]) -> AssistantMessage:
    """`message` with a fresh id for each tool call whose id is empty, in `taken` (the ids of
    the transcript the message joins) or used by an earlier call of the message.

    Guarantees: an id that is unique is kept, so a provider's own id goes back on the wire as
    it was sent; the message is returned as is when every id is unique (no copy); a fresh id
    is the old one's first 24 characters, reduced to letters, digits, `_` and `-` (what every
    provider accepts; a prefix such as Gemini's synthetic one survives), then `_` and 8
    random hex digits, and is in neither `taken` nor the message.
    """
    calls = message.tool_calls
    if not calls:
        return message
    seen: set[str] = set()
    stale: set[int] = set()
    for position, call in enumerate(calls):
        if not call.id or call.id in taken or call.id in seen:
            stale.add(position)
        seen.add(call.id)
    if not stale:
        return message
    content = list(message.content)
    position = -1
    for number, block in enumerate(content):
        if isinstance(block, ToolCall):
            position += 1
            if position in stale:
                fresh = _fresh_id(block.id, taken, seen)
                seen.add(fresh)
                content[number] = block.model_copy(update={"id": fresh})
    return message.model_copy(update={"content": content})


def _fresh_id(old: str, taken: Collection[str], seen: Collection[str]) -> str:
    stem = _NOT_ID.sub("_", old[:_STEM]) or "call"
    while True:
        fresh = f"{stem}_{secrets.token_hex(4)}"
        if fresh not in taken and fresh not in seen:
            return fresh
