"""MCP results and content blocks as `ToolResult`s."""

from __future__ import annotations

from typing import Any

import pydantic_core

from agent_runtime.messages import Content, ImageContent, TextContent, ToolResult, Trust


def content_blocks(blocks: list[Any]) -> list[Content]:
    """Text and images as they are; any other block (audio, resource, link) as its JSON."""
    out: list[Content] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            out.append(TextContent(text=block.text))
        elif kind == "image":
            out.append(ImageContent(data=block.data, mime_type=block.mime_type))
        else:
            dumped = block.model_dump(mode="json", by_alias=True, exclude_none=True)
            out.append(TextContent(text=pydantic_core.to_json(dumped).decode()))
    return out


def call_result(server: str, name: str, result: Any, trust: Trust) -> ToolResult:
    """The `ToolResult` of a `CallToolResult`: an `isError` result stays an error result."""
    content = content_blocks(list(result.content))
    details: dict[str, Any] = {"mcp_server": server, "mcp_tool": name}
    if result.structured_content is not None:
        details["structured"] = pydantic_core.to_jsonable_python(result.structured_content)
    if result.is_error:
        details["outcome"] = "mcp_tool_error"
        if not content:
            content = [TextContent(text=f"MCP tool {name} failed (no message)")]
    return ToolResult(content=content, details=details, is_error=bool(result.is_error), trust=trust)
