"""The exception tree of agent_runtime: one root, a subclass per condition carrying its facts."""

from __future__ import annotations

import re
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


class GuardrailTripped(RunFailed):
    """A blocking guardrail failed the run; its `Error` reason is
    `guardrail: NAME at POINT: EXPLANATION`.

    Attributes:
        at: the point it checked (`model_request`, `model_response`, `tool_result`; at
            `tool_call` a failure blocks the call, not the run).
        explanation: what the guardrail said.
        guardrail: the guardrail's name (its class name).
    """

    def __init__(
        self, reason: str, partial: Any = None, *, at: str, explanation: str, guardrail: str
    ) -> None:
        super().__init__(reason, partial)
        self.at = at
        self.explanation = explanation
        self.guardrail = guardrail


_GUARDRAIL_REASON = re.compile(
    r"guardrail: (?P<guardrail>\S+) at (?P<at>model_request|model_response|tool_call|tool_result)"
    r": (?P<explanation>.*)",
    re.DOTALL,
)


def run_failed(reason: str, partial: Any = None) -> RunFailed:
    """The exception of a run ended by `Error(reason, partial)`: a GuardrailTripped for a
    guardrail's reason, else a RunFailed."""
    match = _GUARDRAIL_REASON.fullmatch(reason)
    if match is None:
        return RunFailed(reason, partial)
    return GuardrailTripped(
        reason,
        partial,
        at=match["at"],
        explanation=match["explanation"],
        guardrail=match["guardrail"],
    )


class InvalidOutput(AgentRuntimeError):
    """A model's answer did not validate as the type asked for: the base of the LLM layer's
    `StructuredOutputError` and of a run's `OutputValidationError`, so one `except` takes both.

    Attributes:
        raw: the text the model returned (a tool call's arguments as JSON).
        errors: pydantic's validation errors (`loc`, `msg`, `type`, `input`).
    """

    raw: str
    errors: list[Any]


class OutputValidationError(RunFailed, InvalidOutput):
    """A run's answer did not validate as its `output_type`, also after `output_retries`
    more attempts in which the model was told what failed. The run's terminal was
    `Error(reason="output_invalid: ...")`.

    Attributes:
        reason: the error reason (starts with `output_invalid:`).
        raw: the last answer's text (a tool call's arguments as JSON).
        errors: pydantic's validation errors of that answer.
        partial: the last answer (an `AssistantMessage`), if known.
    """

    def __init__(self, reason: str, *, raw: str, errors: list[Any], partial: Any = None) -> None:
        super().__init__(reason, partial)
        self.raw = raw
        self.errors = errors


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


class AgentBusy(AgentRuntimeError):
    """The agent is already running; steer it, queue a follow-up, or wait for it to be idle.

    Attributes:
        run_id: the run in progress.
    """

    def __init__(self, key: Any, run_id: str) -> None:
        super().__init__(f"agent {tuple(key)!r} is busy with run {run_id!r}")
        self.key = key
        self.run_id = run_id


class CannotContinue(AgentRuntimeError):
    """`continue_run()` needs a history whose last message is not from the assistant."""


class AgentStopped(AgentRuntimeError):
    """The agent was stopped; it takes no more calls.

    Attributes:
        key: the stopped agent's key.
    """

    def __init__(self, key: Any) -> None:
        super().__init__(f"agent {tuple(key)!r} is stopped")
        self.key = key


class ConcurrentModification(AgentRuntimeError):
    """A session's history moved on since it was read: a compaction based on it was refused.

    Attributes:
        session: the session whose history changed.
        expected: the sequence the caller based its change on.
        actual: the sequence stored when the change was attempted.
    """

    def __init__(self, session: str, expected: int, actual: int) -> None:
        super().__init__(
            f"session {session!r} moved on: expected sequence {expected}, found {actual}"
        )
        self.session = session
        self.expected = expected
        self.actual = actual


class MemoryStoreError(AgentRuntimeError):
    """A session-memory store cannot be opened or cannot carry out a change or a read.

    Raised for a file that is not a database, is a directory, cannot be read or written, is
    truncated or corrupt, or stays locked by another connection; the store's own error is
    chained as `__cause__`.

    Attributes:
        path: the store's file (or `":memory:"`).
        cause: what went wrong, in words (e.g. `"database is locked by another connection"`).
    """

    def __init__(self, path: str, cause: str) -> None:
        super().__init__(f"session memory {path!r}: {cause}")
        self.path = path
        self.cause = cause
