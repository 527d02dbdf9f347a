"""The `agent-runtime` command: inspect the runtime's supervision tree and run the demo."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.console import Console

from agent_runtime.cli._models import add_models_command, run_models
from agent_runtime.cli._tree import render_tree
from agent_runtime.runtime import Runtime


def _tree(args: argparse.Namespace) -> int:
    with Runtime.start(args.config) as runtime:
        Console().print(render_tree(runtime))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from agent_runtime.cli._demo import run_demo  # on use: the demo loads the test doubles

    return run_demo(Console())


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
    commands.add_parser(
        "demo", help="run the offline showcase: delegation, streaming, abort, crash isolation"
    )
    add_models_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `agent-runtime` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handlers = {"tree": _tree, "demo": _demo, "models": run_models}
    if args.command is None:
        parser.print_help()
        return 0
    return handlers[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
