"""The exception tree of agent_runtime: one root, a subclass per condition carrying its facts."""

from __future__ import annotations

from typing import Any


class AgentRuntimeError(Exception):
    """Root of every error raised by agent_runtime."""


class AlreadyRegistered(AgentRuntimeError):
    """A live agent already holds the key.

    Attributes:
        key: the contested key.
        holder: the Agent (or actor ref) that holds it.
    """

    def __init__(self, key: Any, holder: Any) -> None:
        super().__init__(f"key {tuple(key)!r} is already registered to {holder!r}")
        self.key = key
        self.holder = holder


class StreamOverflow(AgentRuntimeError):
    """An event could not be accepted because the stream's queue is full."""


class StreamClosed(AgentRuntimeError):
    """The stream already ended with a terminal event; it accepts no more events."""


class RunFailed(AgentRuntimeError):
    """A run ended with an `Error` terminal.

    Attributes:
        reason: the error reason.
        partial: the partial assistant message, if any.
    """

    def __init__(self, reason: str, partial: Any = None) -> None:
        super().__init__(f"run failed: {reason}")
        self.reason = reason
        self.partial = partial


class RunCanceled(AgentRuntimeError):
    """A run ended with a `Canceled` terminal.

    Attributes:
        reason: why it was canceled (`"user_abort"`, `"timeout"`, `"owner_down"`, ...).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"run canceled: {reason}")
        self.reason = reason


class ConfigError(AgentRuntimeError, ValueError):
    """The configuration is invalid; the message names each bad key, its value and its source."""
