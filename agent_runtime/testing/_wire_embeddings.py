"""The embedding endpoints of the mock server: OpenAI's `POST /v1/embeddings` and Gemini's
`:embedContent` / `:batchEmbedContents`, answering deterministic vectors.

A text's vector is a hashed bag of its lower-cased words, normalised to length 1: the same
text always gets the same vector, texts sharing words get a positive cosine similarity, and
texts with no word in common (almost always) a near-zero one. Each API's per-call limit is
enforced with its 400 (OpenAI: 2048 inputs; Gemini: 100 requests in a batch), so adapters
are seen to split larger calls. Failures are queued with `MockEmbeddings.fail`.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
from collections import deque
from collections.abc import Mapping
from typing import Any

from agent_runtime.llm.errors import LLMError
from agent_runtime.testing._wire_gemini import GeminiWire
from agent_runtime.testing._wire_openai import OpenAIWire

_GEMINI = re.compile(r"/v1beta/models/([^/:]+):(embedContent|batchEmbedContents)")
_OPENAI_PATH = "/v1/embeddings"
OPENAI_MAX_INPUTS = 2048
GEMINI_MAX_BATCH = 100
_WORD = re.compile(r"\w+")

Answer = tuple[int, Any, dict[str, str]]


def embedding_format(method: str, path: str) -> str | None:
    """`"openai"` or `"gemini"` for a request to one of their embedding endpoints, else None."""
    if method != "POST":
        return None
    if path == _OPENAI_PATH:
        return "openai"
    return "gemini" if _GEMINI.fullmatch(path) else None


def fake_vector(text: str, dimensions: int) -> list[float]:
    """The deterministic unit vector of `text` (a hashed bag of its lower-cased words)."""
    vector = [0.0] * dimensions
    for word in _WORD.findall(text.lower()) or [text]:
        digest = hashlib.sha256(word.encode()).digest()
        index = int.from_bytes(digest[:4], "big") % dimensions
        vector[index] += 1.0 if digest[4] % 2 else -1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class MockEmbeddings:
    """The embedding state of one mock server.

    `dimensions`: the length of every vector. `per_token`: the OpenAI endpoint answers one
    vector per word of each text (as llama.cpp's server does for a model without pooling).
    `fail(*entries)` queues failures, each taken by the next embedding request: an
    `LLMError` (rendered in the request's format, `retry_after` included) or an exact
    `(status, body)`. `calls` counts the embedding requests answered.
    """

    def __init__(self, dimensions: int = 16) -> None:
        if dimensions < 1:
            raise ValueError(f"invalid dimensions {dimensions!r} (expected >= 1)")
        self.dimensions = dimensions
        self.per_token = False
        self.calls = 0
        self._lock = threading.Lock()
        self._failures: deque[LLMError | tuple[int, Any]] = deque()

    def fail(self, *entries: LLMError | tuple[int, Any]) -> None:
        """Queue failures for the next embedding requests, one each."""
        with self._lock:
            self._failures.extend(entries)

    def answer(self, wire: str, path: str, body: Any) -> Answer:
        """`(status, body, headers)` of an embedding request of format `wire`."""
        with self._lock:
            self.calls += 1
            failure = self._failures.popleft() if self._failures else None
        if isinstance(failure, LLMError):
            render = OpenAIWire() if wire == "openai" else GeminiWire()
            return render.render_error(failure)
        if failure is not None:
            return failure[0], failure[1], {}
        request = body if isinstance(body, Mapping) else {}
        return self._openai(request) if wire == "openai" else self._gemini(path, request)

    def _openai(self, request: Mapping[str, Any]) -> Answer:
        raw = request.get("input")
        inputs = [raw] if isinstance(raw, str) else raw
        if not isinstance(inputs, list) or not inputs:
            return _openai_error("'input' must be a non-empty string or array of strings")
        if len(inputs) > OPENAI_MAX_INPUTS:
            return _openai_error(
                f"Invalid 'input': array too long, at most {OPENAI_MAX_INPUTS} inputs per request"
            )
        if not all(isinstance(x, str) and x for x in inputs):
            return _openai_error("'input' items must be non-empty strings")
        dimensions = request.get("dimensions")
        size = dimensions if isinstance(dimensions, int) and dimensions > 0 else self.dimensions
        data = []
        for index, text in enumerate(inputs):
            vector: Any = fake_vector(text, size)
            if self.per_token:
                vector = [fake_vector(word, size) for word in _WORD.findall(text) or [text]]
            data.append({"object": "embedding", "index": index, "embedding": vector})
        words = sum(len(_WORD.findall(text)) for text in inputs)
        usage = {"prompt_tokens": words, "total_tokens": words}
        model = request.get("model", "")
        return 200, {"object": "list", "data": data, "model": model, "usage": usage}, {}

    def _gemini(self, path: str, request: Mapping[str, Any]) -> Answer:
        match = _GEMINI.fullmatch(path)
        assert match is not None
        model, method = match.groups()
        if method == "embedContent":
            text = _gemini_text(request)
            if text is None:
                return _gemini_error("* EmbedContentRequest.content: contents is not specified")
            return 200, {"embedding": {"values": self._gemini_vector(text, request)}}, {}
        requests = request.get("requests")
        if not isinstance(requests, list) or not requests:
            return _gemini_error("* BatchEmbedContentsRequest.requests: must not be empty")
        if len(requests) > GEMINI_MAX_BATCH:
            return _gemini_error(
                "* BatchEmbedContentsRequest.requests: at most "
                f"{GEMINI_MAX_BATCH} requests can be in one batch"
            )
        values = []
        for index, item in enumerate(requests):
            item = item if isinstance(item, Mapping) else {}
            if item.get("model") != f"models/{model}":
                return _gemini_error(
                    f"* BatchEmbedContentsRequest.requests[{index}].model: model "
                    f"{item.get('model')!r} does not match models/{model} of the URL"
                )
            text = _gemini_text(item)
            if text is None:
                return _gemini_error(
                    f"* BatchEmbedContentsRequest.requests[{index}].content: contents is "
                    "not specified"
                )
            values.append({"values": self._gemini_vector(text, item)})
        return 200, {"embeddings": values}, {}

    def _gemini_vector(self, text: str, request: Mapping[str, Any]) -> list[float]:
        size = request.get("outputDimensionality")
        return fake_vector(text, size if isinstance(size, int) and size > 0 else self.dimensions)


def _gemini_text(request: Mapping[str, Any]) -> str | None:
    content = request.get("content")
    parts = content.get("parts") if isinstance(content, Mapping) else None
    texts = [
        str(part["text"]) for part in parts or [] if isinstance(part, Mapping) and "text" in part
    ]
    text = " ".join(texts)
    return text if text.strip() else None


def _openai_error(message: str) -> Answer:
    body = {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    }
    return 400, body, {}


def _gemini_error(message: str) -> Answer:
    return 400, {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}, {}
