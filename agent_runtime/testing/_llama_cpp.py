"""The `llama_cpp` dialect of the mock server: how llama-cpp-python's OpenAI-compatible server
(0.3.x, `python -m llama_cpp.server`) departs from OpenAI on the wire, as observed with curl.

- An assistant message with `tool_calls` and `"content": null` fails the server's request
  validation: HTTP 500 whose message is a pydantic dump of every union member (~1.8 KB),
  streamed or not; `content` omitted fails its chat template: HTTP 500 `'dict object' has no
  attribute 'content'` (streamed: an empty 200 stream); `""` is accepted.
- A `tool_choice` naming no tool of the request: HTTP 500 `Tool with name 'x' not found in
  tools`; streamed, an empty 200 event stream.
- `tool_choice: "required"` (chatml-function-calling's `assert tool_choice == "auto"` fails):
  HTTP 500 whose message is empty; streamed, an empty 200 event stream.
- `tool_choice: "auto"` streamed after a tool result (the model goes on calling a function:
  "Automatic streaming tool choice is not supported"): an empty 200 event stream; the same
  request without streaming is answered.
- Streams carry no usage chunk, even with `stream_options.include_usage`.
- An error met after the stream's headers (the prompt past the context window, a
  `tool_choice` it cannot serve) is an HTTP 200 event stream with no event at all.
- A path it does not serve (a `base_url` without `/v1`): HTTP 404 `{"detail": "Not Found"}`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NOT_FOUND: dict[str, Any] = {"detail": "Not Found"}

_ROLES = ("System", "User", "Assistant", "Tool", "Function")


def _server_error(message: str) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": "internal_server_error", "param": None, "code": None}
    }


def _validation_dump(index: int, message: Mapping[str, Any]) -> str:
    """A message in the shape (and about the size) of the server's own validation failure."""
    lines = [f"{len(_ROLES) + 2} validation errors:"]
    for role in _ROLES:
        where = ("body", "messages", index, f"ChatCompletionRequest{role}Message")
        if role == "Assistant":
            lines.append(
                f"  {{'type': 'string_type', 'loc': {(*where, 'content')!r}, "
                f"'msg': 'Input should be a valid string', 'input': None}}"
            )
            continue
        lines.append(
            f"  {{'type': 'literal_error', 'loc': {(*where, 'role')!r}, "
            f"'msg': \"Input should be '{role.lower()}'\", 'input': 'assistant', "
            f"'ctx': {{'expected': \"'{role.lower()}'\"}}}}"
        )
        if role in ("Tool", "Function"):
            field = "tool_call_id" if role == "Tool" else "name"
            lines.append(
                f"  {{'type': 'missing', 'loc': {(*where, field)!r}, 'msg': 'Field required', "
                f"'input': {dict(message)!r}}}"
            )
    lines.append('\n  File "llama_cpp/server/app.py", line 376, in create_chat_completion')
    lines.append("    POST /v1/chat/completions")
    return "\n".join(lines)


def rejection(body: Mapping[str, Any]) -> tuple[dict[str, Any], bool] | None:
    """`(500 body, before_stream)` when this server rejects `body`, else None.

    `before_stream`: the request fails validation, so a streamed request gets the 500 too;
    otherwise the failure comes after the headers and a streamed request gets an empty stream.
    """
    messages = body.get("messages")
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        if "content" not in message:
            return _server_error("'dict object' has no attribute 'content'"), False
        if message["content"] is None:
            return _server_error(_validation_dump(index, message)), True
    choice = body.get("tool_choice")
    if choice == "required" and body.get("tools"):
        return _server_error(""), False
    if choice == "auto" and body.get("stream") and body.get("tools") and _after_tool_result(body):
        return _server_error("Automatic streaming tool choice is not supported"), False
    if isinstance(choice, Mapping):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        tools = body.get("tools")
        names = {
            tool.get("function", {}).get("name")
            for tool in (tools if isinstance(tools, list) else [])
            if isinstance(tool, Mapping)
        }
        if name not in names:
            return _server_error(f"Tool with name '{name}' not found in tools"), False
    return None


def _after_tool_result(body: Mapping[str, Any]) -> bool:
    messages = body.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    return isinstance(last, Mapping) and last.get("role") == "tool"


def without_usage_option(body: Mapping[str, Any]) -> dict[str, Any]:
    """`body` as this server reads it: `stream_options.include_usage` ignored."""
    return {key: value for key, value in body.items() if key != "stream_options"}
