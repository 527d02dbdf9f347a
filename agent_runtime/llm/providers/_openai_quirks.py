"""Request options that some Chat Completions servers are known to reject without saying why.

llama-cpp-python's function-calling chat formats answer `tool_choice: "required"` with a bare
HTTP 500 whose message is empty (its `assert tool_choice == "auto"` fails). When a server
gives no reason, `explain_unexplained_failure` names the options of the request that are in
`KNOWN_REJECTED`, so the error says what to change; docs/providers.md lists the same quirks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agent_runtime.llm._error_map import describe_body
from agent_runtime.llm.errors import LLMError

DOCS = "docs/providers.md, 'A local llama.cpp server'"
_MARK = "what some servers are known to reject"


@dataclass(frozen=True, slots=True)
class RejectedOption:
    """A request option (`field` of the wire body) a server is known to reject, and why."""

    field: str
    matches: Callable[[Any], bool]
    why: str


KNOWN_REJECTED: tuple[RejectedOption, ...] = (
    RejectedOption(
        "tool_choice",
        lambda value: value == "required",
        "llama-cpp-python's function-calling chat formats serve only 'auto', 'none' or a "
        "named tool",
    ),
)
"""The options named by an unexplained failure, in the order they are named."""


def rejected_options(body: Mapping[str, Any]) -> list[str]:
    """`field=value` of each option of the wire `body` in `KNOWN_REJECTED`, with its reason."""
    return [
        f"{option.field}={body[option.field]!r} ({option.why})"
        for option in KNOWN_REJECTED
        if option.field in body and option.matches(body[option.field])
    ]


def explain_unexplained_failure(error: LLMError, body: Mapping[str, Any]) -> None:
    """When `error` is a server failure (5xx) that gives no reason, and `body` sets options
    that servers are known to reject, name them in the error's message and mark it not
    retryable (the server fails this request every time). Anything else is left as it is;
    calling it twice changes nothing more."""
    status = error.status
    if status is None or status < 500 or _MARK in error.message:
        return
    if describe_body(error.body)[0].strip():
        return  # the server said why
    named = rejected_options(body)
    if not named:
        return
    error.message = (
        f"{error.message}: the server gave no reason; the request sets {_MARK}: "
        f"{'; '.join(named)} (see {DOCS})"
    )
    error.args = (error.message,)
    error.retryable = False
