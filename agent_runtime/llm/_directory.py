"""The ModelDirectory port: a provider that lists the models it serves."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class ModelDirectory(Protocol):
    """What can say which models a provider serves (`models check` compares them with the
    names a configuration ships).

    A separate port from `ChatModel`, so that a user's own ChatModel stays one without it:
    the three HTTP adapters (`openai_compatible` and its named hosts, `anthropic`, `gemini`)
    are both. Check with `isinstance(model, ModelDirectory)`.
    """

    async def list_models(self) -> list[str]:
        """The ids of the models the provider serves, in the provider's order.

        Raises:
            LLMError: the call failed (mapped as for `generate`).
        """
        ...

    def list_models_sync(self, *, timeout: float | None = None) -> list[str]:
        """`list_models` for code without an event loop, waiting up to `timeout` seconds.

        Raises:
            LLMError: as `list_models`.
            RuntimeError: called from a running event loop (await `list_models` instead).
            TimeoutError: `timeout` passed (the call was cancelled).
        """
        ...
