"""The `agent-runtime` command: the supervision tree, the demo, and `top` for a runtime
running elsewhere."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from rich.console import Console

from agent_runtime._errors import ConfigError
from agent_runtime.cli._demo_args import add_demo_arguments
from agent_runtime.cli._models import add_models_command, run_models
from agent_runtime.cli._serve import add_serve_command, run_serve
from agent_runtime.cli._tree import render_tree
from agent_runtime.config import load_config
from agent_runtime.runtime import Runtime


def _tree(args: argparse.Namespace) -> int:
    with Runtime.start(args.config, configure_logging=True) as runtime:
        Console().print(render_tree(runtime))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from agent_runtime.cli._demo import demo_command  # on use: it loads the test doubles

    return demo_command(args)


def _top(args: argparse.Namespace) -> int:
    from agent_runtime.cli._top import run_top

    path = args.socket
    if path is None:
        try:
            path = load_config(args.config).telemetry.status_socket
        except ConfigError as exc:
            print(f"agent-runtime top: {exc}", file=sys.stderr)
            return 2
    if path is None:
        print(
            "agent-runtime top: no status socket: pass its path, or set "
            "telemetry.status_socket in the config (--config) of both runtime and top",
            file=sys.stderr,
        )
        return 2
    count = 1 if args.once else args.count
    return run_top(path, interval=args.interval, count=count)


def _positive(kind: type[int] | type[float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {kind.__name__} {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"invalid value {text!r} (expected > 0)")
        return value

    return parse


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
    top = commands.add_parser(
        "top",
        aliases=["watch"],
        help="watch a runtime of another process (started with telemetry.status_socket)",
        description="Live view of a runtime's supervision tree, agents and counters, read "
        "from its status socket. Plain lines when stdout is not a terminal.",
    )
    top.add_argument(
        "socket",
        nargs="?",
        default=None,
        help="the runtime's status socket (default: telemetry.status_socket of --config)",
    )
    top.add_argument(
        "--interval", type=_positive(float), default=1.0, help="seconds between polls (1.0)"
    )
    top.add_argument(
        "-n", "--count", type=_positive(int), default=None, help="stop after COUNT polls"
    )
    top.add_argument("--once", action="store_true", help="print one snapshot and exit")
    add_models_command(commands)
    add_serve_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `agent-runtime` console script: the command's exit status; an
    invalid configuration is reported as its message alone on stderr, with status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handlers = {
        "tree": _tree,
        "demo": _demo,
        "top": _top,
        "watch": _top,
        "models": run_models,
        "serve": run_serve,
    }
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return handlers[args.command](args)
    except ConfigError as exc:  # the message names the key, its value and its source
        print(f"agent-runtime {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
