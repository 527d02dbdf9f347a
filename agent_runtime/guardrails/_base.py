"""What a guardrail is: the `Guardrail` base class, its result and the context it checks in."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict

from agent_runtime._key import AgentKey

GuardrailPoint = Literal["model_request", "model_response", "tool_call", "tool_result"]
GuardrailMode = Literal["block", "report"]
POINTS: tuple[str, ...] = get_args(GuardrailPoint)
MODES: tuple[str, ...] = get_args(GuardrailMode)


class GuardrailResult(BaseModel):
    """A guardrail's verdict: `passed`, and in words why not (`explanation`).

    `GuardrailResult(False, "mentions a password")` and the keyword form are the same.
    """

    model_config = ConfigDict(frozen=True)

    passed: bool
    explanation: str = ""

    def __init__(self, passed: bool, explanation: str = "") -> None:
        super().__init__(passed=passed, explanation=explanation)


class GuardrailContext(BaseModel):
    """Where a check happens: the agent's key (None for a bare loop run), the run, the point,
    and at `tool_call` / `tool_result` the tool's name and the call's arguments."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    agent: AgentKey | None
    run_id: str
    at: GuardrailPoint
    tool_name: str | None = None
    arguments: dict[str, Any] | None = None


class Guardrail:
    """A check on the text passing one point of a run; subclass it and implement `check`.

    Set `at` (`"model_request"`: the messages added since the model last answered - the
    prompt, steering, follow-ups, tool results; `"model_response"`: the answer's text, once
    it is complete; `"tool_call"`: `name + " " + json(arguments)`; `"tool_result"`: the
    result's text) and `mode` (`"block"`, the default, or `"report"`), as class attributes or
    in `__init__`. `check` may be sync or `async def`; it runs on the runtime's event loop, so
    a slow one must be async. A check that raises counts as failed (a guardrail that cannot
    decide does not let the text through), its exception named in the explanation.
    """

    at: GuardrailPoint
    mode: GuardrailMode = "block"

    @property
    def name(self) -> str:
        """The guardrail's name in logs, metrics, span events and errors (its class name)."""
        return type(self).__name__

    def check(
        self, text: str, *, context: GuardrailContext
    ) -> GuardrailResult | Awaitable[GuardrailResult]:
        """The verdict on `text` at `context.at`."""
        raise NotImplementedError(f"{type(self).__name__} must implement check()")


def validated(guardrail: object) -> Guardrail:
    """`guardrail` if it is a usable Guardrail instance.

    Raises:
        TypeError: not a Guardrail instance (a class is named as such).
        ValueError: its `at` or `mode` is not one of the allowed values.
    """
    if isinstance(guardrail, type):
        raise TypeError(
            f"guardrails must be Guardrail instances, not the class {guardrail.__name__} "
            "(create one)"
        )
    if not isinstance(guardrail, Guardrail):
        raise TypeError(
            f"guardrails must be agent_runtime.Guardrail instances, not {type(guardrail).__name__}"
        )
    at = getattr(guardrail, "at", None)
    if at not in POINTS:
        raise ValueError(
            f"guardrail {guardrail.name} has at={at!r} (expected one of: {', '.join(POINTS)})"
        )
    if guardrail.mode not in MODES:
        raise ValueError(
            f"guardrail {guardrail.name} has mode={guardrail.mode!r} "
            f"(expected one of: {', '.join(MODES)})"
        )
    return guardrail
