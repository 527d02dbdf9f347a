"""Fixtures shared by the LLM layer's tests: a real loopback provider server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_runtime.testing.mock_server import MockProviderServer


@pytest.fixture
def server() -> Iterator[MockProviderServer]:
    """A MockProviderServer on 127.0.0.1, stopped after the test."""
    with MockProviderServer() as srv:
        yield srv
