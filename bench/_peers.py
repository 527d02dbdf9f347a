"""The peer benchmarks, each run in its own subprocess with the peers' virtual environment.

`make bench` builds `bench/.venv-peers` from `bench/peers/requirements.txt`; this module never
installs anything. Each script in `bench/peers/` prints one JSON object with `text_turn_us`
({"p50", "p99"}), `tool_turn_us` ({"p50", "p99"}), `burst_1000_ms`, `burst_2500_ms`,
`stream_deltas_per_s`, `plan` (what ran), `versions`, `peer` and `elapsed_s`. Guarantees:
- `run_peers` never raises: a peer that cannot run is reported as `{"error": "..."}`;
- peers run one at a time, so they never compete with each other for the cores;
- a peer runs with tracing disabled and no network, from the peers' interpreter only.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
PEERS_PYTHON = BENCH / ".venv-peers" / "bin" / "python"
SCRIPTS = {
    "pydantic-ai": BENCH / "peers" / "pydantic_ai_bench.py",
    "openai-agents": BENCH / "peers" / "openai_agents_bench.py",
}


def run_peers(timeout: float = 300) -> dict[str, dict[str, Any]]:
    """Run every peer script in turn and return {peer: figures} or {peer: {"error": reason}}.

    `timeout` bounds the whole call in seconds: each peer gets what the earlier ones left, and
    one that overruns is killed and reported as an error.
    """
    if not PEERS_PYTHON.exists():
        missing = f"{PEERS_PYTHON} is missing (make bench builds it)"
        return {peer: {"error": missing} for peer in SCRIPTS}
    deadline = time.monotonic() + timeout
    return {peer: run_peer(script, deadline - time.monotonic()) for peer, script in SCRIPTS.items()}


def run_peer(script: Path, timeout: float) -> dict[str, Any]:
    """One peer script's figures, or {"error": reason} if it failed, overran or printed no JSON."""
    if timeout <= 0:
        return {"error": f"{script.name} not run: no time left"}
    env = os.environ | {"OPENAI_AGENTS_DISABLE_TRACING": "1"}
    env.pop("PYTHONPATH", None)  # the peers see their own venv, never the project
    try:
        done = subprocess.run(
            [str(PEERS_PYTHON), str(script)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=script.parent,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"{script.name} ran over its {timeout:.3g} s"}
    except OSError as error:
        return {"error": f"{script.name} could not start: {error}"}
    if done.returncode != 0:
        return {"error": f"{script.name} exited {done.returncode}: {last_line(done.stderr)}"}
    try:
        figures = json.loads(last_line(done.stdout))
    except json.JSONDecodeError:
        return {"error": f"{script.name} printed no JSON: {last_line(done.stdout)!r}"}
    if not isinstance(figures, dict):
        return {"error": f"{script.name} printed {type(figures).__name__}, not an object"}
    return figures


def last_line(text: str) -> str:
    """The last non-blank line of `text`, or "" (a traceback's last line names the error)."""
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
