"""The one retry of a context overflow: the context transform applied again, at half budget."""

from __future__ import annotations

import inspect
from typing import Any

from agent_runtime.context import estimate_size, truncate
from agent_runtime.llm.types import ChatRequest
from agent_runtime.loop._transcript import validate_transcript
from agent_runtime.loop.types import MessagesTransform

HALF_BUDGET = 0.5


def _takes_budget(transform: MessagesTransform) -> bool:
    try:
        return "budget" in inspect.signature(transform).parameters
    except (TypeError, ValueError):  # a callable without a signature
        return False


async def halved(request: ChatRequest, transform: MessagesTransform) -> ChatRequest | None:
    """`request` with its messages shrunk to half the budget, or None when that does not
    make it smaller (nothing to drop, nothing left, or not a valid transcript).

    A transform that takes a `budget` keyword (as `context.make_transform`'s does) is called
    with `budget=0.5` on the messages it produced for the call that overflowed; any other
    transform's output is truncated to half its size, newest units kept (`context.truncate`).
    """
    sent = list(request.messages)
    if _takes_budget(transform):
        call: Any = transform  # its type knows no `budget`; the signature said it takes one
        shrunk = call(sent, budget=HALF_BUDGET)
        if inspect.isawaitable(shrunk):
            shrunk = await shrunk
        smaller = list(shrunk)
    else:
        limit = estimate_size(sent) // 2
        smaller, _ = truncate(sent, max_chars=limit, keep_first_user=False)
    if not smaller or estimate_size(smaller) >= estimate_size(sent):
        return None
    if validate_transcript(smaller):
        return None
    return request.model_copy(update={"messages": smaller})
