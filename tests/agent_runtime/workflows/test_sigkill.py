"""Durability proved in a subprocess: SIGKILL in the middle of a step, then `resume()` in a new
process finishes the workflow with nothing committed lost and no committed step run twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from agent_runtime.memory import SqliteStore
from agent_runtime.testing import wait_until
from agent_runtime.workflows._store import WorkflowStore

ROOT = Path(__file__).resolve().parents[3]
CHILD = [sys.executable, "-m", "tests.agent_runtime.workflows.sigkill_child"]


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def test_sigkill_mid_step_then_resume_in_a_new_process(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    side = tmp_path / "steps.log"
    child = subprocess.Popen(
        [*CHILD, "start"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        wait_until(
            lambda: "start blocking 1" in lines(side) or child.poll() is not None,
            timeout=60,
            what="the blocking step started",
        )
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
        # committed before the step ran: the current step, its attempt, the state of `first`
        store = SqliteStore(tmp_path / ".agent_runtime" / "memory.sqlite3")
        try:
            before = WorkflowStore(store).get("journey")
        finally:
            store.close()
        assert before is not None
        assert (before.status, before.step, before.attempt) == ("running", "blocking", 1)
        assert before.state == {"done": ["first"]}
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL

    resumed = subprocess.run(
        [*CHILD, "resume"], cwd=tmp_path, env=env, capture_output=True, timeout=120, check=False
    )
    assert resumed.returncode == 0, resumed.stderr.decode()
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["resumed"] == ["journey"]
    info = result["info"]
    assert info["status"] == "completed"
    assert info["state"] == {"done": ["first", "blocking", "last"]}
    assert [(r["step"], r["attempt"], r["outcome"]) for r in info["steps"]] == [
        ("first", 1, "completed"),
        ("blocking", 2, "completed"),
        ("last", 1, "completed"),
    ]
    # `first` was committed before the kill: it never ran again; `blocking` ran again
    assert lines(side) == [
        "start first 1",
        "end first 1",
        "start blocking 1",
        "start blocking 2",
        "end blocking 2",
        "start last 1",
        "end last 1",
    ]
