"""examples/workflow_dynamic_plan.py: a selector picks agents, a planner orders them, the
workflow runs the plan one agent per step, and a summarizer answers; a selector's bad pick is
retried from the committed state."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

from agent_runtime import Runtime, RuntimeConfig
from agent_runtime.llm.types import ChatRequest
from agent_runtime.testing import FunctionModel, wait_until
from tests.examples.workflow_runner import ROOT, run_example, steps


def test_the_plan_is_selected_ordered_run_and_summarized(tmp_path: Path) -> None:
    db = str(tmp_path / "plan.sqlite3")
    request = "dinner and how to get around in Lisbon"
    (info,) = run_example("workflow_dynamic_plan.py", request, "--db", db, cwd=tmp_path)
    assert info["status"] == "completed"
    state = info["state"]
    assert state["selected"] == ["restaurant", "transport"]
    assert state["plan"] == ["transport", "restaurant"]  # the planner's order
    assert list(state["results"]) == ["transport", "restaurant"]  # run in that order
    assert steps(info) == [
        ("select", "completed"),
        ("plan", "completed"),
        ("run_plan", "completed"),
        ("run_plan", "completed"),
        ("summarize", "completed"),
    ]
    assert "tram 28" in state["answer"] and "sardines" in state["answer"]


def _example() -> ModuleType:
    # As `python examples/...` has it: the examples' folder on the path, for `_offline`.
    if str(ROOT / "examples") not in sys.path:
        sys.path.insert(0, str(ROOT / "examples"))
    spec = importlib.util.spec_from_file_location(
        "workflow_dynamic_plan", ROOT / "examples" / "workflow_dynamic_plan.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_selection_of_an_unknown_agent_is_retried() -> None:
    example = _example()
    picks = [["astrologer"], ["activity"]]

    def selector(request: ChatRequest) -> str:
        return json.dumps({"agents": picks.pop(0)})

    with (
        Runtime.start(RuntimeConfig()) as runtime,
        runtime.override_model("selector", FunctionModel(selector)),
    ):
        wf_id = runtime.workflows.start(example.TripPlanner, example.PlanState(request="a day"))
        wait_until(lambda: runtime.workflows.get(wf_id).status != "running", timeout=60)
        info = runtime.workflows.get(wf_id)
    assert info.status == "completed"
    assert [(r.step, r.attempt, r.outcome) for r in info.steps[:2]] == [
        ("select", 1, "failed"),
        ("select", 2, "completed"),
    ]
    assert "unknown agents ['astrologer']" in (info.steps[0].error or "")
    assert info.state.selected == ["activity"]
