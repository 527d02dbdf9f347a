"""The suite's shared `runtime` and `make_runtime` fixtures (tests/conftest.py) keep their word:
each runtime they start is stopped at teardown, the last made first, also after a failing test;
the factory's arguments reach the runtime's config."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).with_name("conftest.py")

# Runs inside pytester's own directory: each test records what it saw in RECORD, and the last
# test checks it after the earlier tests' teardowns.
INNER = '''
from agent_runtime import Runtime
from agent_runtime.config import AgentConfig, MemoryConfig, RuntimeConfig

import pytest

RECORD: dict[str, object] = {"stopped": []}
LABELS: dict[int, str] = {}
STOP = Runtime.stop


def stop_and_record(self: Runtime, timeout: float = 10.0) -> None:
    RECORD["stopped"].append(LABELS.get(id(self), "?"))
    STOP(self, timeout)


@pytest.fixture(scope="module", autouse=True)
def _stops_recorded():
    """Runtime.stop records whom it stops, in this module only (pytester runs it in-process)."""
    Runtime.stop = stop_and_record
    yield
    Runtime.stop = STOP


def recorded(runtime: Runtime, label: str) -> Runtime:
    LABELS[id(runtime)] = label
    RECORD[label] = runtime
    return runtime


def test_a_default_runtime(runtime):
    assert runtime.alive
    assert runtime.config == RuntimeConfig()
    recorded(runtime, "default")


def test_sections_and_a_config(make_runtime):
    first = make_runtime(memory=MemoryConfig(store="memory"), agent={"abort_grace": 60})
    assert first.config.memory.store == "memory" and first.config.agent.abort_grace == 60
    second = make_runtime(RuntimeConfig(agent=AgentConfig(abort_grace=7)))
    assert second.config.agent.abort_grace == 7
    assert first.alive and second.alive
    recorded(first, "first")
    recorded(second, "second")


def test_not_both(make_runtime):
    try:
        make_runtime(RuntimeConfig(), memory={"store": "memory"})
    except TypeError:
        return
    raise AssertionError("no TypeError")


def test_a_failing_test(make_runtime):
    recorded(make_runtime(memory={"store": "memory"}), "failed")
    raise AssertionError("this test fails on purpose")


def test_zz_every_runtime_was_stopped_last_made_first():
    assert RECORD["stopped"] == ["default", "second", "first", "failed"]
    for label in ("default", "first", "second", "failed"):
        assert not RECORD[label].alive, label
'''


def test_the_shared_runtime_fixtures_stop_what_they_started(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["*test_a_failing_test*"])
