"""Test doubles and helpers for code built on agent_runtime: scripted and function-driven
models, a real loopback provider server, and condition waits."""

from agent_runtime.testing._wait import wait_until
from agent_runtime.testing.function import FunctionModel
from agent_runtime.testing.mock_server import MockProviderServer, MockResponse, RecordedRequest
from agent_runtime.testing.scripted import ScriptedModel, ScriptedTurn, ScriptExhausted

__all__ = [
    "FunctionModel",
    "MockProviderServer",
    "MockResponse",
    "RecordedRequest",
    "ScriptExhausted",
    "ScriptedModel",
    "ScriptedTurn",
    "wait_until",
]
