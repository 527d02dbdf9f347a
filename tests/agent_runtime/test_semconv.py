"""Our GenAI names (agent_runtime._semconv) are the OpenTelemetry semantic conventions' own, as
`opentelemetry-semantic-conventions` publishes them (only in its `_incubating` module, so we keep
a copy and check it here), and the package spells no `gen_ai.*` name that is not in that copy."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import agent_runtime._semconv as sc

gen_ai = pytest.importorskip(
    "opentelemetry.semconv._incubating.attributes.gen_ai_attributes",
    reason="needs opentelemetry-semantic-conventions: pip install --group dev",
)
gen_ai_metrics = pytest.importorskip("opentelemetry.semconv._incubating.metrics.gen_ai_metrics")
error_attributes = pytest.importorskip("opentelemetry.semconv.attributes.error_attributes")

PACKAGE = Path(sc.__file__).resolve().parent
OURS = {name: value for name, value in vars(sc).items() if name.isupper()}


@pytest.mark.parametrize("name", sorted(n for n in OURS if n.startswith("GEN_AI_")))
def test_attribute_and_metric_names_are_the_conventions(name: str) -> None:
    published = getattr(gen_ai, name, None) or getattr(gen_ai_metrics, name, None)
    assert published == OURS[name], f"{name}: ours {OURS[name]!r}, conventions {published!r}"


def test_operation_token_and_error_values_are_the_conventions() -> None:
    operations = gen_ai.GenAiOperationNameValues
    assert operations.CHAT.value == sc.OPERATION_CHAT
    assert operations.EMBEDDINGS.value == sc.OPERATION_EMBEDDINGS
    assert operations.INVOKE_AGENT.value == sc.OPERATION_INVOKE_AGENT
    assert operations.EXECUTE_TOOL.value == sc.OPERATION_EXECUTE_TOOL
    assert gen_ai.GenAiTokenTypeValues.INPUT.value == sc.TOKEN_TYPE_INPUT
    assert gen_ai.GenAiTokenTypeValues.COMPLETION.value == sc.TOKEN_TYPE_OUTPUT  # "output"
    assert sc.ERROR_TYPE == error_attributes.ERROR_TYPE
    assert error_attributes.ErrorTypeValues.OTHER.value == sc.ERROR_TYPE_OTHER


def test_span_names_are_operation_then_target() -> None:
    assert sc.span_name(sc.OPERATION_INVOKE_AGENT, "researcher") == "invoke_agent researcher"
    assert sc.span_name(sc.OPERATION_CHAT, "gpt-4o") == "chat gpt-4o"
    assert sc.span_name(sc.OPERATION_EXECUTE_TOOL, None) == "execute_tool"


def test_the_package_uses_no_gen_ai_name_outside_the_checked_copy() -> None:
    """A `gen_ai.*` string literal anywhere in agent_runtime is one of the constants above."""
    known = set(OURS.values())
    unknown: dict[str, str] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if text.startswith("gen_ai.") and " " not in text and text not in known:
                    unknown[text] = str(path.relative_to(PACKAGE))
    assert unknown == {}
