"""The OpenTelemetry GenAI semantic-convention names the runtime's spans and metrics use.

Our own copy: `opentelemetry-semantic-conventions` publishes them only in its `_incubating`
module, which may change in any release; tests/agent_runtime/test_semconv.py checks each
constant here against it. Span names are `{operation} {target}`: `invoke_agent {agent name}`,
`chat {request model}`, `execute_tool {tool name}`, `embeddings {request model}`.
"""

from __future__ import annotations

# Attributes
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_EMBEDDINGS_DIMENSION_COUNT = "gen_ai.embeddings.dimension.count"
ERROR_TYPE = "error.type"

# Values of `gen_ai.operation.name`
OPERATION_CHAT = "chat"
OPERATION_EMBEDDINGS = "embeddings"
OPERATION_INVOKE_AGENT = "invoke_agent"
OPERATION_EXECUTE_TOOL = "execute_tool"

# Values of `gen_ai.token.type`, and of `error.type` when no better one is known
TOKEN_TYPE_INPUT = "input"
TOKEN_TYPE_OUTPUT = "output"
ERROR_TYPE_OTHER = "_OTHER"

# Metrics
GEN_AI_CLIENT_OPERATION_DURATION = "gen_ai.client.operation.duration"
GEN_AI_CLIENT_TOKEN_USAGE = "gen_ai.client.token.usage"


def span_name(operation: str, target: str | None) -> str:
    """The conventions' span name: `"{operation} {target}"`, the operation alone without one."""
    return f"{operation} {target}" if target else operation
