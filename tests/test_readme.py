"""Every ```python block of README.md runs as written, offline, in a fresh process and an
empty working directory, and prints what its `print(...)  # comment` lines say it prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)
CLAIM = re.compile(r"^\s*print\(.*\)\s+#\s*(.+)$", re.MULTILINE)


def python_blocks(text: str) -> list[str]:
    """The code of every ```python block, in order."""
    return BLOCK.findall(text)


def claims(code: str) -> list[str]:
    """What the block's `print(...)  # claim` lines say they print."""
    return [claim.strip() for claim in CLAIM.findall(code)]


def test_the_readme_has_python_blocks_and_links_only_what_users_have() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(python_blocks(text)) >= 3
    assert "DESIGN.md" not in text and "STYLE.md" not in text
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), f"README links to {target}, which is missing"


def test_claims_are_read_from_print_comments() -> None:
    code = "print(x)  # Six words.\nprint(y)\n    print(a, b)  # True canceled\n"
    assert claims(code) == ["Six words.", "True canceled"]


def run_as_written(code: str, tmp_path: Path, label: str) -> None:
    """Run `code` as a script in a fresh process and the empty directory `tmp_path`, offline
    (no provider key, no AGENT_RUNTIME_* override), and check it prints what it claims."""
    script = tmp_path / "block.py"
    script.write_text(code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_RUNTIME_")}
    env["PYTHONPATH"] = str(ROOT)
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        env.pop(key, None)
    done = subprocess.run(
        [sys.executable, script.name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, f"{label} failed:\n{code}\n{done.stderr}"
    for claim in claims(code):
        assert claim in done.stdout, f"{label} did not print {claim!r}:\n{done.stdout}"


@pytest.mark.parametrize("index", range(len(python_blocks(README.read_text(encoding="utf-8")))))
def test_readme_block_runs_as_written(index: int, tmp_path: Path) -> None:
    code = python_blocks(README.read_text(encoding="utf-8"))[index]
    run_as_written(code, tmp_path, f"README block {index}")
