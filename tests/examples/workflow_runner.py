"""Run an example script as its own process (offline models) and read the workflows it prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_example(name: str, *args: str, cwd: Path) -> list[dict[str, Any]]:
    """The workflows (JSON objects, one per stdout line) that `examples/<name>` printed."""
    env = {k: v for k, v in os.environ.items() if k != "AGENT_RUNTIME_EXAMPLE_PROFILE"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        cwd=cwd,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]


def steps(info: dict[str, Any]) -> list[tuple[str, str]]:
    return [(run["step"], run["outcome"]) for run in info["steps"]]
