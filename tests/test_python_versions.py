"""Python 3.11-3.14: every module compiles on each, pyproject.toml says which versions are
supported, and `.ci/run` runs the pytest suite on each interpreter the machine has."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("agent_runtime", "supervisors", "tests", "examples", "bench")
SUPPORTED = ("3.11", "3.12", "3.13")  # each has an interpreter here (pyenv); 3.14 when present
SCRIPT = ROOT / ".ci" / "pytest-versions"


def python_files() -> list[Path]:
    return sorted(
        path
        for top in SOURCES
        for path in (ROOT / top).rglob("*.py")
        if not any(part.startswith(".venv") for part in path.relative_to(ROOT).parts)
    )


def docstrings(tree: ast.AST) -> list[str]:
    owners = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return [
        doc
        for node in ast.walk(tree)
        if isinstance(node, owners)
        if (doc := ast.get_docstring(node, clean=False))
    ]


def test_every_docstring_encodes_as_utf8() -> None:
    # Python 3.13 compiles a docstring through UTF-8 (to strip its indentation): a lone
    # surrogate in one (a "\udcff" escape in a non-raw docstring) fails the import there.
    bad = []
    for path in python_files():
        for doc in docstrings(ast.parse(path.read_bytes(), str(path))):
            try:
                doc.encode("utf-8")
            except UnicodeEncodeError as exc:
                bad.append(f"{path.relative_to(ROOT)}: {exc}")
    assert bad == []


def test_classifiers_name_every_supported_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["requires-python"] == f">={SUPPORTED[0]}"
    classifiers = project["classifiers"]
    for version in SUPPORTED:
        assert f"Programming Language :: Python :: {version}" in classifiers
    assert "Programming Language :: Python :: 3 :: Only" in classifiers


def test_ci_runs_the_suite_on_the_other_versions_after_make_test() -> None:
    steps = [
        line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("make ")
    ]
    assert steps.index("make pytest-versions") == steps.index("make test") + 1


def list_interpreters(tmp_path: Path, pyenv_root: Path) -> list[str]:
    tools = tmp_path / "bin"  # what the script runs, and no python on PATH
    tools.mkdir()
    for tool in ("bash", "dirname", "ls", "sort"):
        found = shutil.which(tool)
        assert found is not None, tool
        (tools / tool).symlink_to(found)
    env = {
        "PATH": str(tools),
        "PYENV_ROOT": str(pyenv_root),
        "PYTHON": str(tmp_path / "fake-3.11"),
        "HOME": str(tmp_path),
    }
    (tmp_path / "fake-3.11").write_text("#!/bin/sh\necho 3.11\n")
    (tmp_path / "fake-3.11").chmod(0o755)
    done = subprocess.run(
        [str(SCRIPT), "--list"], env=env, capture_output=True, text=True, timeout=30, check=True
    )
    return done.stdout.splitlines()


def fake_pyenv_version(root: Path, version: str, reports: str) -> Path:
    """An interpreter under root/versions/VERSION.0 that reports `reports` as its version."""
    minor = version.rsplit(".", 1)[0]
    python = root / "versions" / version / "bin" / f"python{minor}"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\necho {reports}\n")
    python.chmod(0o755)
    return python


def test_each_version_is_run_in_its_own_venv_or_skipped_saying_why(tmp_path: Path) -> None:
    pyenv = tmp_path / "pyenv"
    found = fake_pyenv_version(pyenv, "3.13.0", "3.13")
    fake_pyenv_version(pyenv, "3.12.1", "3.9")  # not what its name says: not used
    lines = list_interpreters(tmp_path, pyenv)
    assert lines[0] == "python3.11: the default interpreter, run by `make test` in .venv"
    assert lines[1].startswith("python3.12: skipped, no interpreter")
    assert lines[2] == f"python3.13: {found} in .venv-3.13"
    assert lines[3].startswith("python3.14: skipped, no interpreter")
    assert len(lines) == 4


def test_the_script_is_what_make_pytest_versions_runs() -> None:
    assert os.access(SCRIPT, os.X_OK)
    makefile = (ROOT / "Makefile").read_text()
    assert "\npytest-versions:\n\tPYTHON=$(PYTHON) MAKE=$(MAKE) .ci/pytest-versions\n" in makefile
