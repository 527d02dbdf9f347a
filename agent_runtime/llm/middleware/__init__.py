"""Middleware: each a ChatModel wrapping a ChatModel, adding one cross-cutting behaviour."""

from agent_runtime.llm.middleware.caching import CachingModel
from agent_runtime.llm.middleware.fallback import CircuitBreaker, FallbackModel
from agent_runtime.llm.middleware.observable import ObservableModel
from agent_runtime.llm.middleware.retrying import RetryingModel
from agent_runtime.llm.middleware.switchable import SwitchableModel

__all__ = [
    "CachingModel",
    "CircuitBreaker",
    "FallbackModel",
    "ObservableModel",
    "RetryingModel",
    "SwitchableModel",
]
