"""examples/workflow_sequence.py: a weather agent, then an activity agent that uses its
answer, as a durable workflow; `--resume` finishes nothing when nothing is unfinished."""

from __future__ import annotations

from pathlib import Path

from tests.examples.workflow_runner import run_example, steps


def test_the_sequence_runs_weather_then_activity(tmp_path: Path) -> None:
    db = str(tmp_path / "trip.sqlite3")
    (info,) = run_example("workflow_sequence.py", "a day out in Madrid", "--db", db, cwd=tmp_path)
    assert info["status"] == "completed"
    assert steps(info) == [("weather", "completed"), ("activity", "completed")]
    state = info["state"]
    assert state["weather"].startswith("Sunny")
    assert "Retiro" in state["activity"]  # the activity agent got the weather's answer
    assert run_example("workflow_sequence.py", "--resume", "--db", db, cwd=tmp_path) == []
