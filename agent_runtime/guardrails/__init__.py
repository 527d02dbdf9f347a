"""Guardrails: checks on the text passing a run's model requests, answers, tool calls and tool
results, which block the run (or the call) or report and let it go on.

Attach them with `start_agent(..., guardrails=[...])`, or per role in config
(`[guardrails.ROLE] use = ["module:Class", ...]`, each class created with no arguments).
"""

from agent_runtime.guardrails._base import (
    Guardrail,
    GuardrailContext,
    GuardrailMode,
    GuardrailPoint,
    GuardrailResult,
)
from agent_runtime.guardrails._builtin import MaxLengthGuardrail, RegexGuardrail
from agent_runtime.guardrails._similarity import Embedder, SimilarityGuardrail
from agent_runtime.guardrails._spec import instantiate, load_class

__all__ = [
    "Embedder",
    "Guardrail",
    "GuardrailContext",
    "GuardrailMode",
    "GuardrailPoint",
    "GuardrailResult",
    "MaxLengthGuardrail",
    "RegexGuardrail",
    "SimilarityGuardrail",
    "instantiate",
    "load_class",
]
