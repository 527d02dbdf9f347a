"""The suite's output shows no log lines: records go to pytest's log capture, also those a
daemon thread logs after its test ended, and after a test configured structlog."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CONFTEST = """
import threading

from supervisors._log import get_logger

go, done = threading.Event(), threading.Event()


def log_after_the_tests() -> None:
    go.wait(30)
    get_logger("agent_runtime.noisy").warning("noisy.after_the_tests", n=2)
    done.set()


def pytest_sessionfinish() -> None:  # no test is running: pytest captures nothing now
    go.set()
    done.wait(30)
"""

TESTS = """
import threading

from agent_runtime import telemetry
from agent_runtime.config import TelemetryConfig
from conftest import log_after_the_tests
from supervisors._log import get_logger


def test_a_warning_during_a_test() -> None:
    get_logger("agent_runtime.noisy").warning("noisy.during_a_test", n=1)


def test_a_thread_that_outlives_a_test_which_configured_structlog() -> None:
    assert telemetry.configure_logging(TelemetryConfig(log_level="debug"))
    threading.Thread(target=log_after_the_tests, daemon=True).start()
"""


def test_no_log_line_reaches_pytests_output(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_noisy.py").write_text(textwrap.dedent(TESTS))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    done = subprocess.run(
        # -s: nothing of the terminal is captured, only log records are (by pytest's logging)
        [
            sys.executable,
            "-m",
            "pytest",
            "-s",
            "-p",
            "tests.conftest",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            "-c",
            str(tmp_path / "pytest.ini"),
            str(tmp_path),
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    output = done.stdout + done.stderr
    assert "noisy.during_a_test" not in output and "noisy.after_the_tests" not in output
