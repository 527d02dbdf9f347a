"""Context-window estimation and truncation: sizes, token estimates, and pairing-safe truncation.

Sizes are heuristics, fast and provider-independent (no tokenizer):
- `estimate_size` counts characters the model reads: text, thinking, tool-call names and JSON
  arguments, tool-result content; an image counts `IMAGE_CHARS`; `details`, ids, usage and
  signatures are not counted (the model never sees them or they cost little).
- `estimate_tokens` is `ceil(size / CHARS_PER_TOKEN)` plus `MESSAGE_OVERHEAD_TOKENS` per
  message (role and framing), so an image costs about `IMAGE_TOKENS`. English prose runs at
  roughly 4 characters a token; code and non-Latin scripts cost more tokens per character.

Truncation works on units: an assistant message with tool calls together with the results of
those calls is one unit; every other message is a unit of its own. Whole units are kept or
dropped, so a valid transcript stays valid (`agent_runtime.loop.validate_transcript`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict

from agent_runtime.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from supervisors._log import get_logger

__all__ = [
    "CHARS_PER_TOKEN",
    "IMAGE_CHARS",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "ContextStats",
    "Strategy",
    "check_size",
    "estimate_size",
    "estimate_tokens",
    "make_transform",
    "message_size",
    "stats",
    "truncate",
]

log = get_logger(__name__)

CHARS_PER_TOKEN = 4
"""Characters per token assumed by `estimate_tokens`."""
IMAGE_TOKENS = 1_000
"""The fixed token cost assumed for one image (providers charge roughly 250-1,600)."""
IMAGE_CHARS = IMAGE_TOKENS * CHARS_PER_TOKEN
"""What an image counts in `estimate_size`, so that it costs `IMAGE_TOKENS`."""
MESSAGE_OVERHEAD_TOKENS = 4
"""Tokens added per message for its role and framing."""

Strategy = Literal["sliding_window", "keep_bookends"]
"""`sliding_window` keeps the newest units; `keep_bookends` keeps the oldest and the newest."""
_STRATEGIES: tuple[str, ...] = get_args(Strategy)


class ContextStats(BaseModel):
    """A summary of a transcript's size, for monitoring and debugging."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    message_count: int
    chars: int
    tokens: int
    by_role: dict[str, int]
    tool_calls: int
    tool_results: int
    images: int


def message_size(message: Message) -> int:
    """The estimated size of one message in characters (see the module docs)."""
    if isinstance(message, UserMessage) and isinstance(message.content, str):
        return len(message.content)
    return sum(_block_size(block) for block in message.content)


def estimate_size(messages: Sequence[Message], system_prompt: str | None = None) -> int:
    """The estimated size of `messages` (and `system_prompt`) in characters.

    `system_prompt` may be given by position or by name (`estimate_size(messages, prompt)`).

    Raises:
        TypeError: `system_prompt` is neither a str nor None.
    """
    if system_prompt is not None and not isinstance(system_prompt, str):
        raise TypeError(f"system_prompt must be a str or None, not {type(system_prompt).__name__}")
    return len(system_prompt or "") + sum(message_size(m) for m in messages)


def estimate_tokens(messages: Sequence[Message], system_prompt: str | None = None) -> int:
    """The estimated token count: `ceil(chars / 4) + 4 per message` (see the module docs).

    Raises:
        TypeError: as `estimate_size`.
    """
    chars = estimate_size(messages, system_prompt)
    return math.ceil(chars / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS * len(messages)


def stats(messages: Sequence[Message], system_prompt: str | None = None) -> ContextStats:
    """Counts and size estimates of `messages` (`by_role` has only the roles present).

    Raises:
        TypeError: as `estimate_size`.
    """
    by_role: dict[str, int] = {}
    tool_calls = images = 0
    for message in messages:
        by_role[message.role] = by_role.get(message.role, 0) + 1
        if isinstance(message, AssistantMessage):
            tool_calls += len(message.tool_calls)
        elif not isinstance(message.content, str):
            images += sum(isinstance(b, ImageContent) for b in message.content)
    return ContextStats(
        message_count=len(messages),
        chars=estimate_size(messages, system_prompt),
        tokens=estimate_tokens(messages, system_prompt),
        by_role=by_role,
        tool_calls=tool_calls,
        tool_results=by_role.get("tool_result", 0),
        images=images,
    )


def check_size(
    messages: Sequence[Message], max_tokens: int, *, system_prompt: str | None = None
) -> bool:
    """True when the estimated tokens of `messages` (and `system_prompt`) fit in `max_tokens`.

    Raises:
        ValueError: `max_tokens` is not an int >= 0.
    """
    _check_limit("max_tokens", max_tokens)
    return estimate_tokens(messages, system_prompt=system_prompt) <= max_tokens


def truncate(
    messages: Sequence[Message],
    max_messages: int | None = None,
    max_chars: int | None = None,
    strategy: Strategy = "sliding_window",
    keep_first_user: bool = True,
) -> tuple[list[Message], list[Message]]:
    """Drop messages until the transcript fits the limits; return `(kept, dropped)`.

    A limit of None is no limit; a transcript within the limits is returned whole. Otherwise:
    - `sliding_window` keeps the newest units that fit, dropping everything older;
    - `keep_bookends` keeps the oldest units that fit in half of the budget and then the
      newest units that fit in the rest, dropping the middle (Lemon keeps `max_messages // 2`
      messages at each end; here both limits apply and units are never split);
    - with `keep_first_user`, the first user message (the task) is always kept, and its
      size and count are taken from the budget first.
    `kept` fits both limits (as Lemon's does). The one exception is the first user message
    under `keep_first_user`: it is kept even when it alone is over a limit (then nothing
    else is). A newest unit too big for the limits is dropped like any other, so `kept` may
    be empty, or end before the last message.

    Guarantees: `kept` and `dropped` partition `messages`, each in the original order; whole
    units are kept (no orphaned result, no unpaired call), so a transcript that passes
    `validate_transcript` still does; on such a transcript, truncating `kept` again with the
    same arguments drops nothing.

    Raises:
        ValueError: a limit is not an int >= 0, or `strategy` is unknown; it is named.
    """
    _check_options(max_messages, max_chars, strategy)
    msgs = list(messages)
    sizes = [message_size(m) for m in msgs]
    max_count = math.inf if max_messages is None else max_messages
    max_size = math.inf if max_chars is None else max_chars
    if len(msgs) <= max_count and sum(sizes) <= max_size:
        return msgs, []

    units = _units(msgs)
    costs = [(len(u), sum(sizes[i] for i in u)) for u in units]
    # Newest first means by each unit's last message (results may follow a user message).
    newest_first = sorted(range(len(units)), key=lambda n: units[n][-1], reverse=True)
    keep: set[int] = set()
    if keep_first_user:
        first_user = next((n for n, u in enumerate(units) if _is_user(msgs[u[0]])), None)
        if first_user is not None:
            keep.add(first_user)
    used_count = sum(costs[n][0] for n in keep)
    used_size = sum(costs[n][1] for n in keep)

    def take(order: Sequence[int], count_cap: float, size_cap: float) -> None:
        """Keep units in `order` while they fit the caps; stop at the first that does not."""
        nonlocal used_count, used_size
        for n in order:
            if n in keep:
                continue
            count, size = costs[n]
            if used_count + count > count_cap or used_size + size > size_cap:
                return
            keep.add(n)
            used_count += count
            used_size += size

    if strategy == "keep_bookends":
        take(
            range(len(units)),
            used_count + _half(max_count - used_count),
            used_size + _half(max_size - used_size),
        )
    take(newest_first, max_count, max_size)

    kept_at = {i for n in keep for i in units[n]}
    kept = [m for i, m in enumerate(msgs) if i in kept_at]
    dropped = [m for i, m in enumerate(msgs) if i not in kept_at]
    return kept, dropped


def make_transform(
    max_messages: int | None = None,
    max_chars: int | None = None,
    strategy: Strategy = "sliding_window",
    keep_first_user: bool = True,
) -> Callable[[list[Message]], list[Message]]:
    """A `LoopConfig.transform_context` that truncates with these options before model calls.

    The returned function is synchronous and pure (it never changes the list it is given);
    it logs `context.truncated` when it drops messages. Its keyword `budget` (default 1.0)
    scales both limits: the loop calls it with `budget=0.5` to retry a call that overflowed
    the model's context window.

    Raises:
        ValueError: as `truncate`, at once rather than at the first model call.
    """
    _check_options(max_messages, max_chars, strategy)

    def transform(messages: list[Message], *, budget: float = 1.0) -> list[Message]:
        count, chars = max_messages, max_chars
        if budget != 1.0:
            count = None if count is None else int(count * budget)
            chars = None if chars is None else int(chars * budget)
        kept, dropped = truncate(messages, count, chars, strategy, keep_first_user)
        if dropped:
            log.info("context.truncated", dropped=len(dropped), kept=len(kept), strategy=strategy)
        return kept

    return transform


# ---------------------------------------------------------------------------------------------


def _block_size(block: Any) -> int:
    if isinstance(block, TextContent):
        return len(block.text)
    if isinstance(block, ThinkingContent):
        return len(block.thinking)
    if isinstance(block, ImageContent):
        return IMAGE_CHARS
    if isinstance(block, ToolCall):
        arguments = block.raw_arguments
        if arguments is None:
            arguments = json.dumps(block.arguments, ensure_ascii=False, default=str)
        return len(block.name) + len(arguments)
    return 0


def _units(messages: list[Message]) -> list[list[int]]:
    """Indices of `messages` grouped into units, in order of each unit's first message.

    A result joins the unit of the latest assistant message if it answers one of its calls
    not yet answered; any other message (users, stray results) is a unit of its own.
    """
    units: list[list[int]] = []
    waiting: dict[str, int] = {}  # unanswered call id -> its unit
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            units.append([index])
            waiting = {call.id: len(units) - 1 for call in message.tool_calls}
        elif isinstance(message, ToolResultMessage) and message.tool_call_id in waiting:
            units[waiting.pop(message.tool_call_id)].append(index)
        else:
            units.append([index])
    return units


def _is_user(message: Message) -> bool:
    return isinstance(message, UserMessage)


def _half(budget: float) -> float:
    return budget if math.isinf(budget) else budget // 2


def _check_limit(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"invalid {name} {value!r} (expected an int >= 0)")


def _check_options(max_messages: Any, max_chars: Any, strategy: Any) -> None:
    if max_messages is not None:
        _check_limit("max_messages", max_messages)
    if max_chars is not None:
        _check_limit("max_chars", max_chars)
    if strategy not in _STRATEGIES:
        raise ValueError(
            f"unknown truncation strategy {strategy!r} (expected one of: {', '.join(_STRATEGIES)})"
        )
