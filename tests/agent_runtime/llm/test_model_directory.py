"""ModelDirectory: the adapters list the models a provider serves; ChatModel stays as it was."""

from __future__ import annotations

import asyncio

import pytest

from agent_runtime.llm import ChatModel, ModelDirectory
from agent_runtime.testing import MockProviderServer, ScriptedModel
from tests.agent_runtime.llm.helpers import adapter, run


@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini"])
def test_every_adapter_lists_the_served_models_async_and_sync(
    server: MockProviderServer, wire: str
) -> None:
    server.models = ["small", "large"]
    model = adapter(wire, server)
    assert isinstance(model, ModelDirectory) and isinstance(model, ChatModel)
    assert model.list_models_sync(timeout=10) == ["small", "large"]
    assert run(model, model.list_models) == ["small", "large"]


def test_a_chat_model_need_not_be_a_model_directory() -> None:
    model = ScriptedModel(["hi"])
    assert isinstance(model, ChatModel) and not isinstance(model, ModelDirectory)
    assert "list_models" not in ChatModel.__dict__


def test_the_sync_twin_refuses_a_running_event_loop(server: MockProviderServer) -> None:
    model = adapter("openai", server)

    async def inside() -> None:
        with pytest.raises(RuntimeError, match="await the async method"):
            model.list_models_sync()

    asyncio.run(inside())
