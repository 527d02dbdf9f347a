"""The `agent-runtime` command: inspect the runtime's supervision tree and run the demo."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.console import Console

from agent_runtime.cli._demo_args import add_demo_arguments
from agent_runtime.cli._tree import render_tree
from agent_runtime.runtime import Runtime


def _tree(args: argparse.Namespace) -> int:
    with Runtime.start(args.config) as runtime:
        Console().print(render_tree(runtime))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from agent_runtime.cli._demo import demo_command  # on use: it loads the test doubles

    return demo_command(args)


def build_parser() -> argparse.ArgumentParser:
    """The command-line parser; `agent-runtime --help` lists every command."""
    parser = argparse.ArgumentParser(
        prog="agent-runtime",
        description="LLM agents as pykka actors under an OTP-style supervision tree.",
    )
    parser.add_argument(
        "--config", default=None, help="path to a runtime TOML file (default: config/runtime.toml)"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser("tree", help="start a runtime, print its supervision tree, stop it")
    add_demo_arguments(
        commands.add_parser(
            "demo",
            help="the showcase, live: delegation, steering, abort, crash isolation, restarts",
            description="An orchestrator and three subagents of one session, with a live "
            "view of the supervision tree and the events (plain lines when stdout is not a "
            "terminal). Offline by default: scripted models with realistic latencies.",
        )
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `agent-runtime` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handlers = {"tree": _tree, "demo": _demo}
    if args.command is None:
        parser.print_help()
        return 0
    return handlers[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
