"""The exception tree of agent_runtime: one root, a subclass per condition carrying its facts.

Every exception agent_runtime raises for a condition of its own is an `AgentRuntimeError`, so
one `except AgentRuntimeError` takes them all; a few also derive from the builtin a caller
would expect (shown in parentheses). Misuse of an API (an argument of the wrong type or value,
a blocking call on the runtime's event loop) raises the builtin `TypeError`, `ValueError` or
`RuntimeError`, and waits that run out of time raise `TimeoutError`, as Python's own do.
`supervisors`, a library of its own, has its own root, `supervisors.SupervisorError`.

```
AgentRuntimeError
├── AlreadyRegistered               a live agent already holds the key (.key, .holder)
├── AgentBusy                       the agent is running: steer, follow_up, wait_for_idle, abort
│   └── ApprovalsPending            its parked tool calls wait for approve/deny (.tool_call_ids)
├── ApprovalError (LookupError)     approve/deny of a call that is not waiting, or bad new args
├── AgentStopped                    the agent was stopped (.key)
├── CannotContinue                  continue_run() after an assistant message
├── Aborted                         AbortSignal.raise_if_aborted (.reason)  [abort]
├── StreamOverflow                  an EventStream's queue is full
├── StreamClosed                    an EventStream already ended
├── RunFailed                       a run ended with Error (.reason, .partial)
│   ├── GuardrailTripped            a blocking guardrail failed it (.at, .explanation, .guardrail)
│   └── OutputValidationError       its answer is not its output_type (also InvalidOutput)
├── RunCanceled                     a run ended with Canceled (.reason)
├── InvalidOutput                   an answer did not validate (.raw, .errors)
├── ConfigError (ValueError)        bad configuration, each bad key named with its source
│   ├── InvalidConfigChange         [llm] a provider edit that would not load
│   ├── ConcurrentConfigEdit        [llm] the file changed under the edit
│   └── ConfirmationRequired        [llm] the edit needs confirm=True
├── ConcurrentModification          a session's history moved on (.session, .expected, .actual)
├── MemoryStoreError                a session-memory store failed (.path, .cause)
├── LLMError                        [llm.errors] a model call failed (.code, .retryable, ...)
│   ├── AuthenticationError, PermissionDeniedError, RateLimitError, QuotaExceededError,
│   │   InvalidRequestError (ContextLengthExceededError), ModelNotFoundError, ProviderError,
│   │   NetworkError, CapabilityNotSupportedError, TruncatedResponseError
│   ├── StructuredOutputError       (also InvalidOutput)
│   └── ScriptExhausted             [testing] a ScriptedModel ran out of turns
├── ToolDefinitionError (ValueError)  [tools] a tool declared wrongly
├── ToolArgumentsError (ValueError)   [tools] a call's arguments did not validate
├── McpServerError                  [mcp] an MCP server could not list its tools (.server)
├── TemplateError                   [templates]
│   ├── TemplateNotFound (LookupError)
│   └── TemplateParameterMissing (KeyError)
├── WorkflowError                   [workflows] (drawn with its facts in workflows/_errors.py)
│   └── InvalidWorkflow (TypeError), UnknownStep (ValueError), WorkflowNotFound (KeyError),
│       WorkflowExists, WorkflowNotPaused, WorkflowFinished, StepTimeout (TimeoutError),
│       InvalidState (TypeError), WorkflowCorrupt, LeaseLost
├── NodeLost                        [cluster] the node holding an agent is gone
└── ClusterUnavailable (ImportError)  [cluster] Ray is not installed
```
`[module]` says where a class is defined when not here; each is exported by its public module
(`agent_runtime.abort`, `agent_runtime.llm`, ...) and the common ones by `agent_runtime`.
"""

from __future__ import annotations

import re
from typing import Any, Literal


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
    """The agent is already running (`prompt()` and `run()` start a run only when it is idle);
    the message says what the caller can do instead: `steer()` the run in progress, queue a
    `follow_up()` for after it, `wait_for_idle()` then prompt, or `abort()` it.

    Attributes:
        key: the busy agent's key.
        run_id: the run in progress.
    """

    def __init__(self, key: Any, run_id: str) -> None:
        super().__init__(
            f"agent {tuple(key)!r} is busy with run {run_id!r}: steer() it, queue a "
            "follow_up() for after it, wait_for_idle() before prompting again, or abort() it"
        )
        self.key = key
        self.run_id = run_id


class ApprovalsPending(AgentBusy):
    """The agent is idle but a turn of it waits for approvals (kept in session memory, e.g.
    after a restart): decide every call with `approve()` / `deny()`, then `continue_run()`.

    Attributes:
        key: the agent's key.
        run_id: the run whose turn waits.
        tool_call_ids: the calls still waiting for a decision (empty: all decided).
    """

    def __init__(self, key: Any, run_id: str, tool_call_ids: list[str]) -> None:
        AgentRuntimeError.__init__(
            self,
            f"agent {tuple(key)!r} has tool calls waiting for approval {tool_call_ids!r} "
            f"(run {run_id!r}): approve() or deny() each, then continue_run()"
            if tool_call_ids
            else f"agent {tuple(key)!r} has decided tool calls of run {run_id!r} still to "
            "run: continue_run() runs them",
        )
        self.key = key
        self.run_id = run_id
        self.tool_call_ids = tool_call_ids


class ApprovalError(AgentRuntimeError, LookupError):
    """`approve()` / `deny()` of a tool call that is not waiting for approval (unknown, or
    decided already), or `approve(args=...)` with arguments the tool refuses; the message
    names the call and the calls that do wait.

    Attributes:
        tool_call_id: the call asked about.
        pending: the ids of the calls waiting for approval.
        kind: `unknown` (no such call waits), `decided` (it was decided already) or
            `invalid_args` (the new arguments do not validate).
    """

    def __init__(
        self,
        message: str,
        tool_call_id: str,
        pending: list[str],
        kind: Literal["unknown", "decided", "invalid_args"] = "unknown",
    ) -> None:
        super().__init__(message)
        self.tool_call_id = tool_call_id
        self.pending = pending
        self.kind = kind


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
