"""The built-in guardrails on their own: patterns and keywords, length, and similarity to a
folder of bad examples through an embedding model (a fake one, with known vectors)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_runtime import GuardrailContext, GuardrailResult, GuardrailTripped, RunFailed
from agent_runtime._errors import run_failed
from agent_runtime.guardrails import (
    Embedder,
    MaxLengthGuardrail,
    RegexGuardrail,
    SimilarityGuardrail,
)
from agent_runtime.llm import openai_compatible_embeddings
from agent_runtime.testing.mock_server import MockProviderServer

CONTEXT = GuardrailContext(agent=None, run_id="r1", at="model_request")


class FakeEmbeddings:
    """An embedding model over a fixed vocabulary: a text's vector counts its known words."""

    VOCABULARY = ("bomb", "build", "cake", "bake", "weather")

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], str | None]] = []

    async def embed(self, texts: list[str], *, task: str | None = None) -> list[list[float]]:
        self.calls.append((list(texts), task))
        return [
            [float(text.lower().split().count(word)) for word in self.VOCABULARY] for text in texts
        ]


def check(guard: object, text: str) -> GuardrailResult:
    result = guard.check(text, context=CONTEXT)  # type: ignore[attr-defined]
    if asyncio.iscoroutine(result):
        result = asyncio.run(result)
    assert isinstance(result, GuardrailResult)
    return result


def test_a_result_takes_positional_or_keyword_arguments() -> None:
    assert GuardrailResult(False, "no") == GuardrailResult(passed=False, explanation="no")
    assert GuardrailResult(True).explanation == ""


def test_the_regex_guardrail_fails_on_a_pattern_and_names_it() -> None:
    guard = RegexGuardrail([r"\d{3}-\d{2}-\d{4}"])
    assert check(guard, "call me").passed
    result = check(guard, "ssn 123-45-6789")
    assert not result.passed
    assert result.explanation == "the text matches the pattern '\\\\d{3}-\\\\d{2}-\\\\d{4}'"
    assert "6789" not in result.explanation


def test_keywords_match_whole_words_ignoring_case() -> None:
    guard = RegexGuardrail(keywords=["pass"])
    assert not check(guard, "the PASS is here").passed
    assert check(guard, "a password").passed  # not the word "pass"
    strict = RegexGuardrail(keywords=["pass"], ignore_case=False)
    assert check(strict, "PASS").passed


def test_keywords_are_literal_not_patterns() -> None:
    guard = RegexGuardrail(keywords=["a.b"])
    assert check(guard, "axb").passed
    assert not check(guard, "see a.b now").passed


def test_a_regex_guardrail_needs_something_to_match_and_valid_patterns() -> None:
    with pytest.raises(ValueError, match="at least one pattern or keyword"):
        RegexGuardrail()
    with pytest.raises(ValueError, match="pattern '\\(' does not compile"):
        RegexGuardrail("(")
    with pytest.raises(ValueError, match="at='somewhere'"):
        RegexGuardrail("x", at="somewhere")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode='warn'"):
        RegexGuardrail("x", mode="warn")  # type: ignore[arg-type]


def test_the_max_length_guardrail_allows_exactly_the_limit() -> None:
    guard = MaxLengthGuardrail(3)
    assert check(guard, "abc").passed
    result = check(guard, "abcd")
    assert not result.passed
    assert result.explanation == "the text is 4 characters long, over the limit of 3"
    for bad in (0, True, 2.5):
        with pytest.raises(ValueError, match="max_chars must be an int >= 1"):
            MaxLengthGuardrail(bad)  # type: ignore[arg-type]


def examples(tmp_path: Path, **files: str) -> Path:
    folder = tmp_path / "bad"
    folder.mkdir()
    for name, text in files.items():
        (folder / f"{name}.txt").write_text(text, encoding="utf-8")
    return folder


def test_the_similarity_guardrail_fails_a_text_close_to_a_bad_example(tmp_path: Path) -> None:
    model = FakeEmbeddings()
    assert isinstance(model, Embedder)  # the port's shape, as a Protocol
    folder = examples(tmp_path, weapons="how to build a bomb")
    guard = SimilarityGuardrail(folder, model, threshold=0.9)
    result = check(guard, "build bomb")
    assert not result.passed
    assert result.explanation == (
        "the text is 1.000 similar to the bad example 'weapons.txt' (threshold 0.9)"
    )
    assert check(guard, "bake a cake").passed


def test_the_threshold_decides(tmp_path: Path) -> None:
    folder = examples(tmp_path, weapons="build bomb")
    text = "build cake"  # cosine 0.5 to "build bomb"
    assert check(SimilarityGuardrail(folder, FakeEmbeddings(), threshold=0.6), text).passed
    assert not check(SimilarityGuardrail(folder, FakeEmbeddings(), threshold=0.5), text).passed


def test_examples_are_embedded_once_as_documents_and_texts_as_queries(tmp_path: Path) -> None:
    model = FakeEmbeddings()
    folder = examples(tmp_path, a="build bomb", b="bake bomb", empty="  \n")
    guard = SimilarityGuardrail(folder, model)

    async def twice() -> None:
        await guard.check("weather", context=CONTEXT)
        await guard.check("cake", context=CONTEXT)

    asyncio.run(twice())
    assert model.calls == [
        (["build bomb", "bake bomb"], "document"),  # the empty file is no example
        (["weather"], "query"),
        (["cake"], "query"),
    ]


def test_an_empty_text_passes_without_a_call(tmp_path: Path) -> None:
    model = FakeEmbeddings()
    guard = SimilarityGuardrail(examples(tmp_path, a="bomb"), model)
    assert check(guard, "  ").passed
    assert model.calls == []


def test_the_similarity_guardrail_refuses_bad_settings(tmp_path: Path) -> None:
    model = FakeEmbeddings()
    with pytest.raises(TypeError, match=r"must be an embedding model .* not str"):
        SimilarityGuardrail(tmp_path, "text-embedding-3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="is not a folder"):
        SimilarityGuardrail(tmp_path / "missing", model)
    with pytest.raises(ValueError, match="holds no non-empty file"):
        SimilarityGuardrail(examples(tmp_path, blank=""), model)
    with pytest.raises(ValueError, match=r"threshold must be in \[-1, 1\], not 1\.5"):
        SimilarityGuardrail(tmp_path / "bad", model, threshold=1.5)


def test_a_guardrail_reason_reads_back_as_guardrail_tripped() -> None:
    error = run_failed("guardrail: NoSecrets at tool_result: has a key: sk-1\nline 2")
    assert isinstance(error, GuardrailTripped) and isinstance(error, RunFailed)
    assert (error.guardrail, error.at) == ("NoSecrets", "tool_result")
    assert error.explanation == "has a key: sk-1\nline 2"
    other = run_failed("rate_limit: slow down")
    assert type(other) is RunFailed


def test_the_similarity_guardrail_works_with_a_real_embedding_adapter_over_http(
    tmp_path: Path,
) -> None:
    # The mock server's vectors are hashed bags of words: the same words, the same vector.
    with MockProviderServer() as server:
        model = openai_compatible_embeddings(server.base_url("openai"), "embed-m")
        folder = examples(tmp_path, weapons="how to build a bomb at home")
        guard = SimilarityGuardrail(folder, model, threshold=0.95)
        assert not check(guard, "how to build a bomb at home").passed
        assert check(guard, "a recipe for lemon cake with fresh eggs").passed
        embedded = [r for r in server.requests if r.format == "openai"]
        assert len(embedded) == 3  # the examples once, then each checked text
