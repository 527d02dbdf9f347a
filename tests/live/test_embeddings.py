"""Embeddings against the real server: llama-cpp-python with SmolLM2-135M in embedding mode
(`--embedding true`, the harness's second server), through the adapter and its middleware
(issue 16). The model is a chat model without a pooling type, so the server answers one
vector per token and the adapter averages them; assertions are about structure and
determinism, never about the quality of the vectors."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from agent_runtime.llm import (
    LLMError,
    ModelNotFoundError,
    ObservableEmbeddingModel,
    OpenAICompatibleEmbeddings,
    ProviderError,
    RetryingEmbeddingModel,
    openai_compatible_embeddings,
)
from tests.live.helpers import SECONDS

SMOLLM2_HIDDEN_SIZE = 576


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.fixture
def embeddings(embedding_url: str, served_model: str) -> OpenAICompatibleEmbeddings:
    # One text a request: llama-cpp-python 0.3.x reads the token vectors of every text after
    # the first of a multi-text request at the wrong offset when the model has no pooling
    # type (same text, cosine ~0), so batches of one keep the vectors right; a call of
    # several texts is still one `embed`, split by the adapter.
    return openai_compatible_embeddings(
        embedding_url, served_model, max_batch_size=1, request_timeout=SECONDS
    )


def test_one_vector_per_text_in_order_and_deterministic(
    embeddings: OpenAICompatibleEmbeddings,
) -> None:
    texts = [
        "The cat sat on the mat.",
        "Stock markets fell sharply today.",
        "The cat sat on the mat.",
    ]
    vectors = embeddings.embed_sync(texts, task="document", timeout=SECONDS)
    assert len(vectors) == 3
    assert {len(v) for v in vectors} == {SMOLLM2_HIDDEN_SIZE}
    assert all(math.isfinite(x) for v in vectors for x in v)
    assert cosine(vectors[0], vectors[2]) > 0.999  # the same text, embedded twice
    assert cosine(vectors[0], vectors[1]) < 0.999
    (again,) = embeddings.embed_sync([texts[1]], task="query", timeout=SECONDS)
    assert cosine(again, vectors[1]) > 0.999


def test_without_pooling_the_token_vectors_are_an_error_when_asked(
    embedding_url: str, served_model: str
) -> None:
    strict = openai_compatible_embeddings(
        embedding_url, served_model, mean_pool_tokens=False, request_timeout=SECONDS
    )
    with pytest.raises(ProviderError, match="one vector per token"):
        strict.embed_sync(["hello"], timeout=SECONDS)


def test_the_middleware_stack_works_over_the_real_server(
    embeddings: OpenAICompatibleEmbeddings,
) -> None:
    model = ObservableEmbeddingModel(RetryingEmbeddingModel(embeddings, max_retries=1))
    (vector,) = model.embed_sync(["a short text"], timeout=SECONDS)
    assert len(vector) == SMOLLM2_HIDDEN_SIZE


def test_a_wrong_base_url_is_model_not_found(embedding_url: str, served_model: str) -> None:
    model = openai_compatible_embeddings(embedding_url.removesuffix("/v1"), served_model)
    with pytest.raises(ModelNotFoundError, match="/embeddings"):
        model.embed_sync(["hello"], timeout=SECONDS)


def test_the_chat_server_refuses_embeddings_with_a_typed_error(
    base_url: str, served_model: str
) -> None:
    """The chat server was not started with `--embedding true`: its failure is an LLMError."""
    model = openai_compatible_embeddings(base_url, served_model, request_timeout=SECONDS)
    with pytest.raises(LLMError) as caught:
        model.embed_sync(["hello"], timeout=SECONDS)
    assert caught.value.status is not None and caught.value.status >= 400
