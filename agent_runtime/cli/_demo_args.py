"""The options of `agent-runtime demo` (kept apart so the parser does not load the demo)."""

from __future__ import annotations

import argparse


def _pace(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid pace {text!r} (expected a number)") from None
    if not 0 < value <= 10:
        raise argparse.ArgumentTypeError(f"invalid pace {text!r} (expected > 0 and <= 10)")
    return value


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """`--model PROFILE` and `--pace FACTOR`."""
    parser.add_argument(
        "--model",
        metavar="PROFILE",
        default=None,
        help="run every agent on the model of this config profile (e.g. local) instead of "
        "the scripted ones",
    )
    parser.add_argument(
        "--pace",
        metavar="FACTOR",
        type=_pace,
        default=1.0,
        help="scale the scripted models' latencies (0.5: twice as fast; default 1)",
    )
