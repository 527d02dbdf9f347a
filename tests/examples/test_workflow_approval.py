"""examples/workflow_approval.py: a workflow paused for approval is revised once with
`resume_with`, outlives the process that started it (SQLite in a temporary directory), and is
approved by a new process; the example leaves no file behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_approval_survives_a_restart_of_the_process(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_RUNTIME_")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "workflow_approval.py")],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines == [
        "[process 1] paused: approve draft 1? 'After months of work and many careful reviews,"
        " we are happy to ship on 12 May.'",
        "[process 1] paused: approve draft 2? 'We ship on 12 May.'",  # revised with the feedback
        "[process 1] exits while the workflow waits",
        "[process 2] after the restart: paused (approve draft 2?)",  # still paused
        "[process 2] resume() continued 0 workflows",
        "  approve: attempt 2, the stored answer is replayed",
        "[process 2] completed: published 'We ship on 12 May.'",
        "steps: draft:completed approve:completed draft:completed approve:completed"
        " publish:completed",
    ], done.stdout
    assert done.stderr == "", done.stderr
    assert not list(tmp_path.iterdir()), "the example left files in its working directory"
