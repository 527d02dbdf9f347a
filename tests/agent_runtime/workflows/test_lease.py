"""Leases between processes on one database: while its owner lives, another process calling
`resume()` does not run a workflow (the owner renews its lease while a step runs longer than
the lease lasts); once the owner is SIGKILLed (or its lease expired while it was stopped) the
survivor takes it over and finishes it, every step's result committed once, and a stale
owner's commit is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agent_runtime.testing import wait_until
from tests.agent_runtime.workflows.lease_flow import STEPS

ROOT = Path(__file__).resolve().parents[3]
CHILD = [sys.executable, "-m", "tests.agent_runtime.workflows.lease_child"]
LEASE = 2.0  # seconds a lease lasts unless renewed


def _lines(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text(encoding="utf-8").splitlines()]


def _passes(out: Path) -> int:
    return sum(1 for line in out.read_text().splitlines() if line.startswith("PASS"))


def _spawn(tmp_path: Path, mode: str, name: str) -> tuple[subprocess.Popen[bytes], Path, Path]:
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with out.open("wb") as stdout, err.open("wb") as stderr:
        child = subprocess.Popen(
            [*CHILD, mode, str(LEASE)], cwd=tmp_path, env=env, stdout=stdout, stderr=stderr
        )
    return child, out, err


def _committed_once(info: dict[str, Any]) -> None:
    assert info["status"] == "completed"
    assert info["state"] == {"done": list(STEPS)}  # a step committed twice would show twice
    completed = [r["step"] for r in info["steps"] if r["outcome"] == "completed"]
    assert completed == list(STEPS)


def _stop(*children: subprocess.Popen[bytes]) -> None:
    for child in children:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)


def test_the_survivor_finishes_a_workflow_whose_owner_was_sigkilled(tmp_path: Path) -> None:
    steps = tmp_path / "steps.log"
    (tmp_path / "hold").touch()
    owner, _, owner_err = _spawn(tmp_path, "start", "owner")
    survivor = None
    try:
        wait_until(
            lambda: (
                any(ln[:2] == ["start", "s2"] for ln in _lines(steps)) or owner.poll() is not None
            ),
            timeout=60,
            what="s2 started",
        )
        assert owner.poll() is None, owner_err.read_text()
        survivor, survivor_out, survivor_err = _spawn(tmp_path, "follow", "survivor")
        # while the owner lives, the survivor's resume() passes leave the workflow alone, for
        # more than two leases' time: the owner renews its lease while s2 runs
        wait_until(
            lambda: _passes(survivor_out) >= 3 or survivor.poll() is not None,
            timeout=60,
            what="3 passes",
        )
        first_pass = time.monotonic()
        wait_until(
            lambda: time.monotonic() - first_pass > 2.5 * LEASE or survivor.poll() is not None,
            timeout=60,
            what="two leases' time",
        )
        assert survivor.poll() is None, survivor_err.read_text()
        assert all(ln[-1] == str(owner.pid) for ln in _lines(steps))
        assert _lines(steps)[-1][:2] == ["start", "s2"]  # held there
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=30)
        (tmp_path / "hold").unlink()
        assert survivor.wait(timeout=90) == 0, survivor_err.read_text()
    finally:
        _stop(owner, *([survivor] if survivor else []))
    info = json.loads((tmp_path / f"result-{survivor.pid}.json").read_text())
    _committed_once(info)
    assert info["lease"]["epoch"] == 2  # taken over once
    ran_by = {(ln[1], ln[-1]) for ln in _lines(steps) if ln[0] == "end"}
    assert (STEPS[-1], str(survivor.pid)) in ran_by


def test_a_stale_owner_s_commit_is_refused_after_a_takeover(tmp_path: Path) -> None:
    steps = tmp_path / "steps.log"
    (tmp_path / "hold").touch()
    owner, _, owner_err = _spawn(tmp_path, "start", "owner")
    survivor = None
    try:
        wait_until(
            lambda: (
                any(ln[:2] == ["start", "s2"] for ln in _lines(steps)) or owner.poll() is not None
            ),
            timeout=60,
            what="s2 started",
        )
        assert owner.poll() is None, owner_err.read_text()
        os.kill(owner.pid, signal.SIGSTOP)  # mid-step: its lease (LEASE) runs out
        (tmp_path / "hold").unlink()
        survivor, _, survivor_err = _spawn(tmp_path, "follow", "survivor")
        assert survivor.wait(timeout=90) == 0, survivor_err.read_text()
        os.kill(owner.pid, signal.SIGCONT)  # it goes on with s2, and tries to commit
        wait_until(
            lambda: "workflow.lease.lost" in owner_err.read_text() or owner.poll() is not None,
            timeout=30,
            what="the owner's commit refused",
        )
        assert "workflow.lease.lost" in owner_err.read_text()
    finally:
        _stop(owner, *([survivor] if survivor else []))
    info = json.loads((tmp_path / f"result-{survivor.pid}.json").read_text())
    _committed_once(info)
    s2 = [ln for ln in _lines(steps) if ln[:2] == ["start", "s2"]]
    assert {ln[-1] for ln in s2} == {str(owner.pid), str(survivor.pid)}  # ran again, once committed
