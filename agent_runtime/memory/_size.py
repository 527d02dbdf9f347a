"""The size of a session history in bytes, as `SessionHistory.bytes` and the events count it."""

from __future__ import annotations

from collections.abc import Iterable

from agent_runtime.messages import Message


def message_bytes(messages: Iterable[Message]) -> int:
    """The sum of the UTF-8 lengths of the messages' JSON (`message.model_dump_json()`).

    Every message encodes as UTF-8 (lone surrogates were replaced when it was made), so this
    never raises for a valid `Message`.
    """
    return sum(len(message.model_dump_json().encode()) for message in messages)
