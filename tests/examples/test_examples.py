"""Every example of examples/ runs offline as its docstring says (`python examples/NAME.py`),
in a fresh process and an empty working directory, and prints what it claims to show."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# Run by tests of their own (a server under load, durable workflows).
OWN_TESTS = {"starlette_sse.py"}
OWN_PREFIXES = ("workflow_",)

EXPECTED: dict[str, list[str]] = {
    "orchestrator.py": [
        "delegate -> [a subagent] done: list the facts",
        "delegate -> [a subagent] done: find the weak points",
        "answer: Both reports are in",
        "agents now: critic, orchestrator, researcher",
        "both subagents streaming; abort() -> True",
        "canceled: critic (parent_aborted: user_abort), orchestrator (user_abort),"
        " researcher (parent_aborted: user_abort)",
        "all idle, every transcript valid: True",
    ],
    "steer_and_abort.py": [
        "search(c0): error=False",
        "search(c1): error=True",  # skipped by the steering message, still given a result
        "answer: Pricing only, as asked",
        "abort() -> True",
        "events after the abort: tool_execution_end,",
        "run() raised RunCanceled, reason: user_abort",
        "abort() when idle -> False",
        "answer: Stopped early",
    ],
    "structured_output.py": [
        "output: Book(title='Dune', year=1965)",
        "told on retry: The answer did not validate as Book",
        "OutputValidationError, raw answer: Dune, I think",
        "with on_failure: Book(title='unknown', year=0) error",
    ],
    "guardrails.py": [
        "tool call blocked: True",
        "refused the call: deleting files is not allowed here",
        "answer: I may not delete files",
        "GuardrailTripped: RegexGuardrail at model_response",
    ],
    "shared_memory.py": [
        "writer:   I see 2 earlier messages; the last: The launch moved to 12 May.",
        "stranger: I see 0 earlier messages",
        "restarted writer holds 4 messages",
    ],
    "providers.py": [
        "Answer from the backup (Anthropic).",
        "Answer from Gemini, with the whole history.",
        "Gemini was sent 3 messages",
    ],
    "gateway_client.py": [
        "no token: 401",
        "alice on session s1: 403",
        "start: 201 scripted:scripted",
        "prompt: 202 True",
        "events: agent_start turn_start message_start message_end message_start message_update"
        " message_end turn_end agent_end",
        "streamed text: echo: hello gateway",
        "replayed after 3 -> True",
        "stop: {'stopped': True}",
    ],
    "asyncio_stream.py": [
        "second request while busy: 409 busy",
        "first request: 200, 20 streamed deltas",
        "the async tool ran on this loop: True",
        "a client that leaves: 200, 3 streamed deltas",
        "'canceled': 1",
        "the loop kept ticking: True",
    ],
}


# The library's warnings (stdlib logging shows them on stderr when nothing is configured) for
# the failures an example provokes on purpose; any other stderr line fails the test.
EXPECTED_WARNINGS: dict[str, tuple[str, ...]] = {
    "guardrails.py": ("guardrail.failed ", "loop.run.failed "),
    "providers.py": ("llm.fallback.failed_over ",),
    "structured_output.py": ("loop.run.output_invalid ",),
}


def _examples() -> list[str]:
    return sorted(
        path.name
        for path in EXAMPLES.glob("*.py")
        if not path.name.startswith("_")
        and path.name not in OWN_TESTS
        and not path.name.startswith(OWN_PREFIXES)
    )


def test_every_example_says_what_it_shows() -> None:
    assert sorted(EXPECTED) == _examples()


@pytest.mark.parametrize("name", _examples())
def test_example_runs_offline(name: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_RUNTIME_")}
    env["PYTHONPATH"] = str(ROOT)
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        env.pop(key, None)  # offline means no key is needed
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout}\n{done.stderr}"
    for line in EXPECTED.get(name, []):
        assert line in done.stdout, f"{name} did not print {line!r}:\n{done.stdout}"
    expected = EXPECTED_WARNINGS.get(name, ())
    unexpected = [line for line in done.stderr.splitlines() if not line.startswith(expected)]
    assert unexpected == [], f"{name} wrote to stderr (a warning, a log line):\n{done.stderr}"
    assert not list(tmp_path.iterdir()), "an example left files in its working directory"
