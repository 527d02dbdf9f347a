"""`agent-runtime demo`: the live view on a terminal, plain lines elsewhere, every promise
of the story held, and `--model PROFILE`.

The demo runs in a subprocess, as a user runs it: under a pseudo-terminal (the `pty`
module) for the live view, with a pipe for the plain lines. `--pace` shortens the scripted
latencies; the story waits for each of its moments, so it holds at any pace. `make run`
installs the package alone, and the demo runs with the modules of every extra and of the dev
group unimportable.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import os
import pty
import re
import select
import shlex
import shutil
import struct
import subprocess
import sys
import termios
import time
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from agent_runtime import cli
from agent_runtime.testing import wait_until

PACE = "0.4"
DEADLINE = 90.0  # seconds a demo run may take before the test gives up on it
PROMISES = [
    "a crashed subagent left its parent untouched",
    "the researcher was steered mid-run",
    "two subagents ran in parallel",
    "an abort left a valid transcript",
    "an aborted run was continued",
    "a transient agent was restarted with its history",
    "the orchestrator answered",
]
ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][0-9A-Za-z]")


def demo_command(*args: str) -> list[str]:
    """The `agent-runtime` console script's entry point, run by this interpreter."""
    call = f"import sys; from agent_runtime.cli import main; sys.exit(main({list(args)!r}))"
    return [sys.executable, "-c", call]


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_RUNTIME_")}
    for name in ("COLUMNS", "LINES", "NO_COLOR", "TERM", "FORCE_COLOR"):
        env.pop(name, None)
    return env


def run_under_pty(args: list[str], columns: int = 120, rows: int = 50) -> tuple[int, str]:
    """Run `args` with a pseudo-terminal of `columns` x `rows` as stdin, stdout and stderr;
    returns the exit code and everything it wrote to the terminal."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {**clean_env(), "TERM": "xterm-256color"}
    process = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + DEADLINE
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        code = process.wait(timeout=max(deadline - time.monotonic(), 1.0))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)
    return code, b"".join(chunks).decode("utf-8", errors="replace")


def screen_text(raw: str) -> str:
    """What a terminal shows of `raw`, as text: the escape sequences dropped."""
    return ANSI.sub("", raw).replace("\r", "")


def test_live_view_under_a_terminal_shows_the_tree_activities_and_the_summary() -> None:
    code, raw = run_under_pty(demo_command("demo", "--pace", PACE))
    text = screen_text(raw)
    assert code == 0, text[-3000:]
    assert "\x1b[?25l" in raw  # rich Live hid the cursor: the view was redrawn in place
    # The supervision tree, with the agents, their status and what they were doing.
    assert "subagents (supervisor one_for_one)" in text
    assert "agent:demo/orchestrator/0 (supervisor one_for_one)" in text  # transient
    for agent in ("orchestrator/0", "researcher/0", "critic/0", "writer/0"):
        assert f"{agent} running" in text, agent
    assert re.search(r"orchestrator/0 running waiting on (critic|researcher|writer)/0", text)
    assert "in tool search_notes" in text
    assert "streaming" in text
    assert "for orchestrator/0" in text  # who delegated
    assert "↻ 1" in text  # the orchestrator's restart, in the tree
    # The event log and the counters.
    assert "events" in text and "step 5/5: the orchestrator answers" in text
    assert "restarts 1" in text
    # The summary table, the promises, and the answer.
    assert "summary" in text and "tokens in/out" in text and "wall time" in text
    assert "4 agents" in text
    for promise in PROMISES:
        assert f"✔ {promise}" in text, promise
    assert "the orchestrator's answer" in text
    assert "demo finished" in text


def test_plain_lines_when_stdout_is_not_a_terminal() -> None:
    done = subprocess.run(
        demo_command("demo", "--pace", PACE),
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=DEADLINE,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert "\x1b" not in out  # no escape sequences: plain lines only
    lines = out.splitlines()
    # One line per event, as it happened, each starting with its time.
    steps = [line for line in lines if "── step" in line]
    assert [s.split("── ")[1].split(":")[0] for s in steps] == [f"step {n}/5" for n in range(1, 6)]
    assert any(re.match(r"^\s*\d+\.\d\ds\s+researcher/0\s+→ search_notes", line) for line in lines)
    assert any("critic/0" in line and "✖ run failed: agent_crashed" in line for line in lines)
    assert any("⟳ provider retry 1" in line for line in lines)
    assert any("writer/0" in line and "run canceled: parent_aborted" in line for line in lines)
    # The end: the tree, the summary, the promises, the answer.
    assert "supervision tree at the end:" in out
    assert re.search(r"orchestrator/0\s+3\s+1\s+1\s", out)  # 3 runs: 1 failed, 1 canceled
    assert "runtime.stats(): runs: completed 4 failed 2 canceled 2" in out
    for promise in PROMISES:
        assert f"✔ {promise}" in out, promise
    assert "answer: Run LLM agents under a supervision tree" in out
    assert lines[-1] == "demo finished"


def test_model_profile_runs_the_story_on_that_model_and_skips_what_it_gave_no_occasion_for() -> (
    None
):
    # The shipped `scripted` profile echoes and never delegates: the demo says which steps
    # it could not show, still restarts the transient orchestrator, and exits 0.
    done = subprocess.run(
        demo_command("demo", "--model", "scripted"),
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=DEADLINE,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert out.splitlines()[0] == "agent-runtime demo · model profile 'scripted'"
    assert "skipped: a researcher run did not happen" in out
    assert "- the researcher was steered mid-run (no researcher ran)" in out
    assert "✔ a transient agent was restarted with its history" in out
    assert "answer: echo: Write a short brief" in out


def test_unknown_model_profile_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--model", "nope"]) == 2
    err = capsys.readouterr().err
    assert "agent-runtime demo: unknown model profile 'nope'" in err
    assert "scripted" in err  # the configured profiles are named


@pytest.mark.parametrize("pace", ["0", "-1", "fast"])
def test_pace_must_be_a_positive_number(pace: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["demo", "--pace", pace])
    assert info.value.code == 2
    assert f"invalid pace {pace!r}" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_live_view_in_tmux_shows_the_tree_mid_run_and_the_summary_at_the_end(
    tmp_path: Path,
) -> None:
    session = f"demo-test-{os.getpid()}"
    done_file = tmp_path / "exit-code"
    shell = f"{shlex.join(demo_command('demo', '--pace', PACE))}; echo $? > {done_file}; sleep 30"
    env = {**clean_env(), "TERM": "xterm-256color"}
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "50", shell],
        check=True,
        env=env,
    )
    try:
        seen_mid_run = _wait_for_screen(session, "waiting on", DEADLINE)
        assert "subagents (supervisor one_for_one)" in seen_mid_run
        assert "orchestrator/0 running" in seen_mid_run
        end = _wait_for_screen(session, "demo finished", DEADLINE)
        assert "summary" in end and "wall time" in end
        wait_until(lambda: done_file.exists() and done_file.read_text().strip(), DEADLINE)
        assert done_file.read_text().strip() == "0"
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)


def _wait_for_screen(session: str, wanted: str, timeout: float) -> str:
    """The tmux pane's screen as soon as it shows `wanted`; fails after `timeout` s."""
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", session],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        if wanted in screen:
            return screen
        time.sleep(0.1)  # polling the pane: tmux has no way to wait for text
    raise AssertionError(f"the screen never showed {wanted!r}; last screen:\n{screen}")


# -- `make run` installs the package alone: the demo needs no extra and no development tool ----


def base_distributions() -> set[str]:
    """The distributions `pip install agent-runtime` brings: the declared dependencies and
    theirs, without extras (normalized names)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    todo = [Requirement(r) for r in project["dependencies"]]
    found = {"agent-runtime"}
    while todo:
        requirement = todo.pop()
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if name in found:
            continue
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        found.add(name)
        todo += [Requirement(r) for r in importlib.metadata.requires(name) or []]
    return found


BLOCKER = """
import sys
BLOCKED = {blocked!r}
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is not installed by `make run`")
sys.meta_path.insert(0, Blocker())
from agent_runtime.cli import main
sys.exit(main(["demo", "--pace", {pace!r}]))
"""


def test_make_run_installs_the_package_without_extras_or_groups() -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    # Not the variables of a make this test may run under (`make pytest-versions` runs the
    # suite with VENV=.venv-3.12 given to make, which its children inherit in MAKEFLAGS).
    inherited = {"MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES", "MAKELEVEL", "VENV", "PYTHON"}
    env = {k: v for k, v in os.environ.items() if k not in inherited}
    done = subprocess.run(
        ["make", "-n", "-B", "run"], cwd=ROOT, capture_output=True, text=True, timeout=30, env=env
    )
    installs = [line for line in done.stdout.splitlines() if "pip install" in line]
    assert installs == [".venv/bin/python -m pip install --quiet --disable-pip-version-check -e ."]


def test_the_demo_runs_with_the_base_dependencies_alone() -> None:
    """Every module of an extra or of the dev group (uvicorn, starlette, mcp, psycopg, pytest,
    the providers' SDKs, ...) fails to import, as in the venv `make run` makes."""
    base = base_distributions()
    blocked = sorted(
        module
        for module, distributions in importlib.metadata.packages_distributions().items()
        if not {re.sub(r"[-_.]+", "-", d).lower() for d in distributions} & base
    )
    assert {"uvicorn", "mcp", "pytest", "openai"} <= set(blocked)
    assert not {"pykka", "httpx", "pydantic", "structlog", "rich"} & set(blocked)
    env = {**clean_env(), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", BLOCKER.format(blocked=set(blocked), pace=PACE)],
        capture_output=True,
        text=True,
        env=env,
        timeout=DEADLINE,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == "demo finished"
