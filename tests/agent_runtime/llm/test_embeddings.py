"""Embedding adapters over real HTTP on 127.0.0.1 (the mock server's embedding endpoints):
the port, task types, batching, bad input, and the chat adapters' error taxonomy (issue 16)."""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Sequence
from typing import Any

import pytest

from agent_runtime.llm import (
    AuthenticationError,
    EmbeddingModel,
    GeminiEmbeddings,
    InvalidRequestError,
    ModelNotFoundError,
    OpenAICompatibleEmbeddings,
    ProviderError,
    RateLimitError,
    gemini_embeddings,
    openai_compatible_embeddings,
)
from agent_runtime.testing.mock_server import MockProviderServer


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def openai_model(server: MockProviderServer, **options: Any) -> OpenAICompatibleEmbeddings:
    return openai_compatible_embeddings(server.base_url("openai"), "embed-m", **options)


def gemini_model(server: MockProviderServer, **options: Any) -> GeminiEmbeddings:
    return gemini_embeddings("text-embedding-004", "k", base_url=server.url, **options)


def embedding_requests(server: MockProviderServer) -> list[Any]:
    return [r for r in server.requests if r.format in ("openai", "gemini")]


# -- the port ------------------------------------------------------------------------------------


def test_the_port_has_the_signature_the_issue_fixes() -> None:
    for name in ("embed", "embed_sync"):
        assert callable(getattr(EmbeddingModel, name))
    parameters = inspect.signature(EmbeddingModel.embed).parameters
    assert list(parameters) == ["self", "texts", "task"]
    assert parameters["task"].kind is inspect.Parameter.KEYWORD_ONLY
    assert parameters["task"].default is None
    assert inspect.iscoroutinefunction(EmbeddingModel.embed)
    assert list(inspect.signature(openai_compatible_embeddings).parameters)[:3] == [
        "base_url",
        "model",
        "api_key",
    ]


def test_both_adapters_satisfy_the_port(server: MockProviderServer) -> None:
    assert isinstance(openai_model(server), EmbeddingModel)
    assert isinstance(gemini_model(server), EmbeddingModel)


# -- the OpenAI wire -----------------------------------------------------------------------------


def test_openai_embeddings_come_back_one_per_text_in_order(server: MockProviderServer) -> None:
    model = openai_model(server, api_key="sk-test")
    texts = ["the cat sat", "stock prices fell", "the cat sat"]
    vectors = model.embed_sync(texts, timeout=10)
    assert len(vectors) == 3 and {len(v) for v in vectors} == {16}
    assert vectors[0] == vectors[2]
    assert cosine(vectors[0], vectors[1]) < 0.9
    (request,) = embedding_requests(server)
    assert request.path == "/v1/embeddings"
    assert request.json["input"] == texts and request.json["model"] == "embed-m"
    assert request.headers["authorization"] == "Bearer sk-test"


def test_openai_answers_out_of_order_are_put_back_in_order(server: MockProviderServer) -> None:
    first, second = [1.0, 0.0], [0.0, 1.0]
    body = {
        "data": [
            {"index": 1, "embedding": second},
            {"index": 0, "embedding": first},
        ]
    }
    server.embeddings.fail((200, body))
    assert openai_model(server).embed_sync(["a", "b"], timeout=10) == [first, second]


def test_openai_task_is_sent_only_through_the_prefixes(server: MockProviderServer) -> None:
    plain = openai_model(server)
    plain.embed_sync(["x"], task="query", timeout=10)
    prefixed = openai_model(server, query_prefix="query: ", document_prefix="passage: ")
    prefixed.embed_sync(["x"], task="query", timeout=10)
    prefixed.embed_sync(["x"], task="document", timeout=10)
    prefixed.embed_sync(["x"], timeout=10)
    inputs = [r.json["input"] for r in embedding_requests(server)]
    assert inputs == [["x"], ["query: x"], ["passage: x"], ["x"]]
    assert all(set(r.json) <= {"model", "input", "encoding_format"} for r in server.requests)


def test_openai_dimensions_are_asked_for(server: MockProviderServer) -> None:
    vectors = openai_model(server, dimensions=4).embed_sync(["a b"], timeout=10)
    assert len(vectors[0]) == 4
    assert embedding_requests(server)[0].json["dimensions"] == 4


def test_token_vectors_are_mean_pooled_unless_refused(server: MockProviderServer) -> None:
    server.embeddings.per_token = True
    (pooled,) = openai_model(server).embed_sync(["alpha beta"], timeout=10)
    alpha, beta = openai_model(server, mean_pool_tokens=True).embed_sync(
        ["alpha", "beta"], timeout=10
    )
    assert pooled == pytest.approx([(a + b) / 2 for a, b in zip(alpha, beta, strict=True)])
    with pytest.raises(ProviderError, match="one vector per token") as caught:
        openai_model(server, mean_pool_tokens=False).embed_sync(["alpha beta"], timeout=10)
    assert not caught.value.retryable


def test_more_texts_than_a_call_takes_are_split_in_order(server: MockProviderServer) -> None:
    texts = [f"text number {i}" for i in range(2100)]
    vectors = openai_model(server).embed_sync(texts, timeout=30)
    assert len(vectors) == 2100
    assert vectors[2099] == openai_model(server).embed_sync([texts[2099]], timeout=10)[0]
    sizes = [len(r.json["input"]) for r in embedding_requests(server)[:2]]
    assert sizes == [2048, 52]


def test_the_mock_refuses_what_the_api_refuses(server: MockProviderServer) -> None:
    """The batching above is needed: one call of 2049 inputs is a 400."""
    with pytest.raises(InvalidRequestError, match="at most 2048"):
        openai_model(server, max_batch_size=4096).embed_sync(["a"] * 2049, timeout=30)


# -- Gemini --------------------------------------------------------------------------------------


def test_gemini_task_types_are_retrieval_query_and_document(server: MockProviderServer) -> None:
    model = gemini_model(server)
    (query,) = model.embed_sync(["where is the cat"], task="query", timeout=10)
    documents = model.embed_sync(["the cat is here", "dogs bark"], task="document", timeout=10)
    model.embed_sync(["no task"], timeout=10)
    single, batch, untyped = embedding_requests(server)
    assert single.path == "/v1beta/models/text-embedding-004:embedContent"
    assert single.json["taskType"] == "RETRIEVAL_QUERY"
    assert single.headers["x-goog-api-key"] == "k"
    assert batch.path == "/v1beta/models/text-embedding-004:batchEmbedContents"
    assert [r["taskType"] for r in batch.json["requests"]] == ["RETRIEVAL_DOCUMENT"] * 2
    assert [r["model"] for r in batch.json["requests"]] == ["models/text-embedding-004"] * 2
    assert "taskType" not in untyped.json
    assert cosine(query, documents[0]) > cosine(query, documents[1])


def test_gemini_splits_batches_at_its_limit_of_100(server: MockProviderServer) -> None:
    texts = [f"item {i}" for i in range(250)]
    vectors = gemini_model(server, output_dimensionality=8).embed_sync(texts, timeout=30)
    assert len(vectors) == 250 and {len(v) for v in vectors} == {8}
    assert [len(r.json["requests"]) for r in embedding_requests(server)] == [100, 100, 50]
    with pytest.raises(InvalidRequestError, match="at most 100 requests"):
        gemini_model(server, max_batch_size=101).embed_sync(["a"] * 101, timeout=10)


def test_a_wrong_gemini_key_is_an_authentication_error(server: MockProviderServer) -> None:
    body = {
        "error": {
            "code": 400,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
            "details": [{"reason": "API_KEY_INVALID"}],
        }
    }
    server.embeddings.fail((400, body))
    with pytest.raises(AuthenticationError):
        gemini_model(server).embed_sync(["a"], timeout=10)


def test_a_missing_gemini_key_fails_before_any_request(
    server: MockProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(AuthenticationError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        gemini_embeddings("m", base_url=server.url).embed_sync(["a"], timeout=10)
    assert not server.requests


# -- errors, the chat adapters' taxonomy ---------------------------------------------------------


@pytest.mark.parametrize("wire", ["openai", "gemini"])
def test_provider_errors_are_mapped_as_for_chat(server: MockProviderServer, wire: str) -> None:
    model = openai_model(server) if wire == "openai" else gemini_model(server)
    server.embeddings.fail(RateLimitError("slow down", 7.0, status=429))
    with pytest.raises(RateLimitError) as caught:
        model.embed_sync(["a"], timeout=10)
    assert caught.value.retry_after == 7.0 and caught.value.retryable
    assert caught.value.provider == ("openai_compatible" if wire == "openai" else "gemini")
    server.embeddings.fail((503, {"error": {"message": "overloaded"}}))
    with pytest.raises(ProviderError):
        model.embed_sync(["a"], timeout=10)


def test_a_wrong_base_url_is_model_not_found_naming_the_url(server: MockProviderServer) -> None:
    model = openai_compatible_embeddings(server.url, "m")  # no /v1
    with pytest.raises(ModelNotFoundError, match=r"POST http://127\.0\.0\.1:\d+/embeddings"):
        model.embed_sync(["a"], timeout=10)


def test_a_malformed_answer_is_a_provider_error(server: MockProviderServer) -> None:
    server.embeddings.fail((200, {"data": [{"index": 0, "embedding": [1.0]}]}))
    with pytest.raises(ProviderError, match="1 vectors for 2 texts"):
        openai_model(server).embed_sync(["a", "b"], timeout=10)
    server.embeddings.fail((200, {"unexpected": True}))
    with pytest.raises(ProviderError, match="without embeddings"):
        gemini_model(server).embed_sync(["a"], timeout=10)


# -- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("texts", "task", "error", "match"),
    [
        ([], None, ValueError, "empty list"),
        ("one text", None, TypeError, r"single str: wrap it, embed\(\[text\]\)"),
        (["ok", 3], None, TypeError, r"texts\[1\] is int, not str"),
        (["ok", None], None, TypeError, r"texts\[1\] is NoneType"),
        (["ok", "  "], None, ValueError, r"texts\[1\] is empty"),
        (42, None, TypeError, "takes a list of str, got int"),
        (["ok"], "search", ValueError, "invalid embedding task 'search'"),
    ],
)
def test_bad_input_is_named_before_any_request(
    server: MockProviderServer, texts: Any, task: Any, error: type[Exception], match: str
) -> None:
    for model in (openai_model(server), gemini_model(server)):
        with pytest.raises(error, match=match):
            model.embed_sync(texts, task=task, timeout=10)
        with pytest.raises(error, match=match):
            asyncio.run(model.embed(texts, task=task))
    assert not server.requests


def test_bad_options_are_named() -> None:
    with pytest.raises(ValueError, match="max_batch_size 0"):
        openai_compatible_embeddings("http://x/v1", "m", max_batch_size=0)
    with pytest.raises(ValueError, match="dimensions -1"):
        openai_compatible_embeddings("http://x/v1", "m", dimensions=-1)
    with pytest.raises(ValueError, match="output_dimensionality 0"):
        gemini_embeddings("m", "k", output_dimensionality=0)


def test_embed_sync_refuses_a_running_loop(server: MockProviderServer) -> None:
    async def inside() -> None:
        openai_model(server).embed_sync(["a"])

    with pytest.raises(RuntimeError, match="await the async method"):
        asyncio.run(inside())
