"""Importing the official `mcp` SDK, which is an optional extra of agent-runtime."""

from __future__ import annotations

from types import ModuleType

EXTRA_HINT = "pip install 'agent-runtime[mcp]'"


def require_sdk() -> ModuleType:
    """The `mcp` package, imported on first use.

    Raises:
        ImportError: the SDK is not installed; the message names the `mcp` extra.
    """
    try:
        import mcp
    except ImportError as exc:
        raise ImportError(
            f"agent_runtime.mcp needs the official MCP SDK, the optional extra 'mcp': "
            f"{EXTRA_HINT} ({exc})"
        ) from exc
    return mcp
