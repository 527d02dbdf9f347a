"""The live tier: tests against a real llama.cpp server (llama-cpp-python with SmolLM2-135M).

`make test-live` (tests/live/harness.py) builds the server, starts it once per mode and runs
this directory with `LIVE_LLAMA_URL` set; without it every test here is skipped, so
`make test` needs no compiler and no model. The model is tiny: tests assert structure (a
tool was called, usage is there, the error is typed), never the quality of an answer.
"""

from __future__ import annotations

import os

import pytest

from agent_runtime.llm import OpenAICompatibleModel, llama_cpp

LIVE_URL = os.environ.get("LIVE_LLAMA_URL")
EMBEDDING_URL = os.environ.get("LIVE_LLAMA_EMBEDDING_URL")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if LIVE_URL:
        return
    skip = pytest.mark.skip(reason="needs a llama.cpp server: run `make test-live`")
    for item in items:
        if "tests/live/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(skip)


@pytest.fixture
def mode() -> str:
    """The server's chat format: `chatml-function-calling`, or `template` (the GGUF's own)."""
    return os.environ.get("LIVE_LLAMA_MODE", "template")


@pytest.fixture
def base_url() -> str:
    assert LIVE_URL is not None
    return LIVE_URL


@pytest.fixture
def served_model() -> str:
    """The model id the server serves (its `--model_alias`)."""
    return os.environ.get("LIVE_LLAMA_MODEL", "")


@pytest.fixture
def n_ctx() -> int:
    return int(os.environ.get("LIVE_LLAMA_N_CTX", "2048"))


@pytest.fixture
def model(base_url: str, served_model: str) -> OpenAICompatibleModel:
    return llama_cpp(served_model, base_url, request_timeout=120.0, idle_timeout=60.0)


@pytest.fixture
def embedding_url() -> str:
    """The base URL (with /v1) of the same model served in embedding mode (`--embedding true`)."""
    if not EMBEDDING_URL:
        pytest.skip("no embedding server: tests/live/harness.py starts one")
    return EMBEDDING_URL
