"""hypothesis strategies for arbitrary valid messages and events (shared by the model tests)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from agent_runtime._key import AgentKey
from agent_runtime.events import (
    AgentEnd,
    AgentStart,
    Canceled,
    CustomEvent,
    Error,
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
)
from agent_runtime.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    Usage,
    UserMessage,
)

# Arbitrary unicode (hypothesis excludes lone surrogates, which JSON cannot carry as UTF-8).
text = st.text(max_size=40)
finite = st.floats(allow_nan=False, allow_infinity=False)
counts = st.integers(min_value=0, max_value=2**62)

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | finite | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(text, json_values, max_size=5)

text_content = st.builds(TextContent, text=text)
image_content = st.builds(ImageContent, data=st.binary(max_size=24).map(bytes.hex), mime_type=text)
thinking_content = st.builds(
    ThinkingContent, thinking=text, signature=st.none() | text, redacted=st.booleans()
)
tool_calls = st.builds(ToolCall, id=text, name=text, arguments=json_objects)
user_content = st.one_of(text_content, image_content)
assistant_content = st.one_of(text_content, thinking_content, tool_calls)

usages = st.builds(Usage, input_tokens=counts, output_tokens=counts, cached_input_tokens=counts)

user_messages = st.builds(
    UserMessage, content=text | st.lists(user_content, max_size=3), timestamp=finite
)
assistant_messages = st.builds(
    AssistantMessage,
    content=st.lists(assistant_content, max_size=4),
    stop_reason=st.sampled_from(["stop", "length", "tool_use", "error", "aborted"]),
    error_message=st.none() | text,
    usage=usages,
    model=text,
    provider=text,
    timestamp=finite,
)
tool_result_messages = st.builds(
    ToolResultMessage,
    tool_call_id=text,
    tool_name=text,
    content=st.lists(user_content, max_size=3),
    details=st.none() | json_objects,
    is_error=st.booleans(),
    trust=st.sampled_from(["trusted", "untrusted"]),
    timestamp=finite,
)
messages = st.one_of(user_messages, assistant_messages, tool_result_messages)
tool_results = st.builds(
    ToolResult,
    content=st.lists(user_content, max_size=3),
    details=st.none() | json_objects,
    is_error=st.booleans(),
    trust=st.sampled_from(["trusted", "untrusted"]),
)

non_empty = st.text(min_size=1, max_size=20)
agent_keys = st.builds(AgentKey, session=non_empty, role=non_empty, index=counts)
deltas = st.builds(
    MessageDelta,
    kind=st.sampled_from(["text", "thinking", "tool_call"]),
    content_index=counts,
    delta=text,
)


def _event(cls: type[Any], **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.builds(
        cls, agent=st.none() | agent_keys, run_id=text, seq=counts, ts=finite, **fields
    )


EVENT_STRATEGIES: dict[type[Any], st.SearchStrategy[Any]] = {
    AgentStart: _event(AgentStart),
    TurnStart: _event(TurnStart),
    CustomEvent: _event(CustomEvent, name=non_empty, data=json_values),
    MessageStart: _event(MessageStart, message=messages),
    MessageUpdate: _event(MessageUpdate, message=assistant_messages, delta=deltas),
    MessageEnd: _event(MessageEnd, message=messages),
    ToolExecutionStart: _event(ToolExecutionStart, tool_call_id=text, name=text, args=json_objects),
    ToolExecutionUpdate: _event(
        ToolExecutionUpdate, tool_call_id=text, name=text, args=json_objects, partial=tool_results
    ),
    ToolExecutionEnd: _event(
        ToolExecutionEnd, tool_call_id=text, name=text, result=tool_results, is_error=st.booleans()
    ),
    ToolApprovalRequested: _event(
        ToolApprovalRequested, tool_call_id=text, name=text, args=json_objects
    ),
    ToolApprovalDecided: _event(
        ToolApprovalDecided,
        tool_call_id=text,
        name=text,
        approved=st.booleans(),
        reason=st.none() | text,
        by=st.none() | text,
        args=st.none() | json_objects,
    ),
    TurnEnd: _event(
        TurnEnd, message=assistant_messages, tool_results=st.lists(tool_result_messages, max_size=2)
    ),
    ProviderRetry: _event(ProviderRetry, attempt=counts, delay=finite, error=text),
    ProviderRetryEnd: _event(
        ProviderRetryEnd,
        attempt=counts,
        outcome=st.sampled_from(["succeeded", "failed", "aborted"]),
    ),
    EventsDropped: _event(EventsDropped, count=counts),
    AgentEnd: _event(AgentEnd, new_messages=st.lists(messages, max_size=3)),
    Error: _event(Error, reason=text, partial=st.none() | assistant_messages),
    Canceled: _event(Canceled, reason=text),
}
"""One strategy per event class, every field drawn."""

events = st.one_of(*EVENT_STRATEGIES.values())
