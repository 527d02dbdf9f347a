"""agent-runtime: LLM agents as pykka actors under an OTP-style supervision tree.

This module re-exports the names most programs need: the runtime, agents and their options,
messages, events, tools, errors. It is not the whole public surface: these public modules
hold more names (in their `__all__`, where they have one; the API reference has a page for
each):
`agent_runtime.agent`, `agent_runtime.runtime`, `agent_runtime.event_stream`,
`agent_runtime.registry`, `agent_runtime.abort` (the agent, its host and streams),
`agent_runtime.llm` (models, providers, middleware, embeddings), `agent_runtime.memory`,
`agent_runtime.tools`, `agent_runtime.loop`, `agent_runtime.context`, `agent_runtime.events`,
`agent_runtime.messages`, `agent_runtime.config`, `agent_runtime.telemetry`,
`agent_runtime.guardrails`, `agent_runtime.workflows`, `agent_runtime.templates`,
`agent_runtime.evaluation`, `agent_runtime.testing`, `agent_runtime.mcp` (extra `mcp`),
`agent_runtime.server` (extra `server`), `agent_runtime.cluster` (extra `cluster`), and the
generic `supervisors` package; the `agent-runtime` command (`agent_runtime.cli`) is
documented by its `--help`. Modules and packages whose name starts with `_` are private.

`__version__` is the installed distribution's version (from its metadata).
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version

from agent_runtime._errors import (
    AgentBusy,
    AgentRuntimeError,
    AgentStopped,
    AlreadyRegistered,
    ApprovalError,
    ApprovalsPending,
    CannotContinue,
    ConfigError,
    GuardrailTripped,
    MemoryStoreError,
    OutputValidationError,
    RunCanceled,
    RunFailed,
    StreamClosed,
    StreamOverflow,
)
from agent_runtime._key import AgentKey
from agent_runtime._loop_guard import BlockingCallWarning
from agent_runtime.abort import Aborted, AbortSignal, AbortTable
from agent_runtime.agent import (
    Agent,
    AgentOptions,
    AgentOptionsDict,
    AgentState,
    RunEvents,
    RunResult,
)
from agent_runtime.agent._approvals import ApprovalDecision, PendingApproval
from agent_runtime.agent._delegate import delegate
from agent_runtime.config import RuntimeConfig, load_config
from agent_runtime.event_stream import EventStream, StreamStats
from agent_runtime.event_stream._subscription import Subscription
from agent_runtime.events import (
    AgentEnd,
    AgentStart,
    Canceled,
    CustomEvent,
    Error,
    Event,
    EventAdapter,
    EventsDropped,
    MessageDelta,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ProviderRetry,
    ProviderRetryEnd,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
    is_terminal,
)
from agent_runtime.guardrails import Guardrail, GuardrailContext, GuardrailResult
from agent_runtime.llm.errors import (
    AuthenticationError,
    CapabilityNotSupportedError,
    ContextLengthExceededError,
    InvalidRequestError,
    LLMError,
    ModelNotFoundError,
    NetworkError,
    PermissionDeniedError,
    ProviderError,
    QuotaExceededError,
    RateLimitError,
)
from agent_runtime.loop import AgentContext, LoopConfig, RetryPolicy
from agent_runtime.memory import MemoryPolicy, SessionMemory
from agent_runtime.messages import (
    AssistantMessage,
    Content,
    ImageContent,
    Message,
    MessageAdapter,
    MessageListAdapter,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from agent_runtime.registry import AgentRegistry
from agent_runtime.runtime import (
    AgentStatus,
    Runtime,
    RuntimeStats,
    RuntimeTree,
    SubscriptionStatus,
    TreeNode,
)
from agent_runtime.templates import (
    Template,
    TemplateError,
    TemplateNotFound,
    TemplateParameterMissing,
)
from agent_runtime.tools import (
    Tool,
    ToolArgumentsError,
    ToolContext,
    ToolDefinitionError,
    ToolRegistry,
    error_result,
    normalize_result,
    tool,
)
from agent_runtime.workflows import (
    InvalidWorkflow,
    StepContext,
    StepTimeout,
    UnknownStep,
    Workflow,
    WorkflowError,
    WorkflowExists,
    WorkflowFinished,
    WorkflowInfo,
    WorkflowNotFound,
    WorkflowNotPaused,
)

try:
    __version__ = _distribution_version("agent-runtime")
except PackageNotFoundError:  # a source tree imported without being installed
    __version__ = "0+unknown"

# Sorted (ruff RUF022). Of the workflows API, `step` and `max_retries` stay in
# agent_runtime.workflows.
__all__ = [
    "AbortSignal",
    "AbortTable",
    "Aborted",
    "Agent",
    "AgentBusy",
    "AgentContext",
    "AgentEnd",
    "AgentKey",
    "AgentOptions",
    "AgentOptionsDict",
    "AgentRegistry",
    "AgentRuntimeError",
    "AgentStart",
    "AgentState",
    "AgentStatus",
    "AgentStopped",
    "AlreadyRegistered",
    "ApprovalDecision",
    "ApprovalError",
    "ApprovalsPending",
    "AssistantMessage",
    "AuthenticationError",
    "BlockingCallWarning",
    "Canceled",
    "CannotContinue",
    "CapabilityNotSupportedError",
    "ConfigError",
    "Content",
    "ContextLengthExceededError",
    "CustomEvent",
    "Error",
    "Event",
    "EventAdapter",
    "EventStream",
    "EventsDropped",
    "Guardrail",
    "GuardrailContext",
    "GuardrailResult",
    "GuardrailTripped",
    "ImageContent",
    "InvalidRequestError",
    "InvalidWorkflow",
    "LLMError",
    "LoopConfig",
    "MemoryPolicy",
    "MemoryStoreError",
    "Message",
    "MessageAdapter",
    "MessageDelta",
    "MessageEnd",
    "MessageListAdapter",
    "MessageStart",
    "MessageUpdate",
    "ModelNotFoundError",
    "NetworkError",
    "OutputValidationError",
    "PendingApproval",
    "PermissionDeniedError",
    "ProviderError",
    "ProviderRetry",
    "ProviderRetryEnd",
    "QuotaExceededError",
    "RateLimitError",
    "RetryPolicy",
    "RunCanceled",
    "RunEvents",
    "RunFailed",
    "RunResult",
    "Runtime",
    "RuntimeConfig",
    "RuntimeStats",
    "RuntimeTree",
    "SessionMemory",
    "StepContext",
    "StepTimeout",
    "StreamClosed",
    "StreamOverflow",
    "StreamStats",
    "Subscription",
    "SubscriptionStatus",
    "Template",
    "TemplateError",
    "TemplateNotFound",
    "TemplateParameterMissing",
    "TextContent",
    "ThinkingContent",
    "Tool",
    "ToolApprovalDecided",
    "ToolApprovalRequested",
    "ToolArgumentsError",
    "ToolCall",
    "ToolContext",
    "ToolDefinitionError",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolRegistry",
    "ToolResult",
    "ToolResultMessage",
    "TreeNode",
    "TurnEnd",
    "TurnStart",
    "UnknownStep",
    "Usage",
    "UserMessage",
    "Workflow",
    "WorkflowError",
    "WorkflowExists",
    "WorkflowFinished",
    "WorkflowInfo",
    "WorkflowNotFound",
    "WorkflowNotPaused",
    "delegate",
    "error_result",
    "is_terminal",
    "load_config",
    "normalize_result",
    "tool",
]
