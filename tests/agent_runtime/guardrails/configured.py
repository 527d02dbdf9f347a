"""Guardrail classes the config tests name as `tests.agent_runtime.guardrails.configured:X`."""

from __future__ import annotations

from agent_runtime import Guardrail, GuardrailContext, GuardrailResult


class NoPasswords(Guardrail):
    """Blocks a request that mentions a password."""

    at = "model_request"

    def check(self, text: str, *, context: GuardrailContext) -> GuardrailResult:
        return GuardrailResult("password" not in text.lower(), "mentions a password")


class NeedsArguments(Guardrail):
    at = "model_request"

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def check(self, text: str, *, context: GuardrailContext) -> GuardrailResult:
        return GuardrailResult(True)


NOT_A_CLASS = 42
