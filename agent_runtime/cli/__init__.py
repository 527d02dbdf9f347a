"""The `agent-runtime` command: the demo and a view of the supervision tree."""

from agent_runtime.cli._main import build_parser, main
from agent_runtime.cli._tree import render_tree

__all__ = ["build_parser", "main", "render_tree"]
