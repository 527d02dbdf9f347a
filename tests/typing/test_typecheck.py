"""The public API as type checkers see it (issue 36.3): mypy (the project's `[tool.mypy]`:
strict, no pydantic plugin) and basedpyright (the engine of pyright and so of VS Code's
Pylance, in pyright's standard mode) both accept, with no error and no unused ignore:

- `typed_api.py` beside this file: `assert_type` of typed agents, results and options, and
  the lines that must fail, each with the ignore comment of each checker;
- every ```python block of README.md, and of the docs/ pages whose blocks are whole programs
  (`tests.test_docs.RUNNABLE_PAGES`), as written;
- a call of every public pydantic model's constructor with its required fields alone,
  generated here: a default a checker does not see (`Field(None, ge=1)`) is a missing argument.

The files are laid in a temporary directory; the package is read from this checkout.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import BaseModel

import agent_runtime
import supervisors
from tests.test_docs import RUNNABLE_PAGES
from tests.test_readme import README, python_blocks

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
# pyright's standard mode, as Pylance's default "basic" and "standard" users see it, and
# only pyright's own ignore comments (`# type: ignore` lines are mypy's).
PYRIGHT_CONFIG = {
    "typeCheckingMode": "standard",
    "pythonVersion": "3.11",
    "extraPaths": [str(ROOT)],
    "include": ["."],
    "enableTypeIgnoreComments": False,
    "reportUnnecessaryTypeIgnoreComment": "error",
}


def public_modules() -> Iterator[ModuleType]:
    """Every module of the two packages with no `_`-prefixed part (with `__all__` or not:
    `agent_runtime.config` has none)."""
    for package in (agent_runtime, supervisors):
        yield package
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                yield importlib.import_module(info.name)


def public_model_calls() -> str:
    """A module calling each public pydantic model with its required fields (by alias)."""
    imports: set[str] = set()
    calls: list[str] = []
    seen: set[type] = set()
    for module in public_modules():
        names = getattr(module, "__all__", [n for n in vars(module) if not n.startswith("_")])
        for name in names:
            model = getattr(module, name)
            if not (isinstance(model, type) and issubclass(model, BaseModel)) or model in seen:
                continue
            if not model.__module__.startswith(("agent_runtime", "supervisors")):
                continue
            seen.add(model)
            if any("__init__" in vars(c) for c in model.__mro__[: model.__mro__.index(BaseModel)]):
                continue  # a constructor of its own: typed_api.py checks those it needs
            required = [f.alias or n for n, f in model.model_fields.items() if f.is_required()]
            imports.add(module.__name__)
            calls.append(f"{module.__name__}.{name}({', '.join(f'{r}=_any' for r in required)})")
    lines = [f"import {name}" for name in sorted(imports)]
    return "\n".join(["from typing import Any", *lines, "", "_any: Any = None", "", *calls, ""])


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("typing")
    (folder / "typed_api.py").write_text((HERE / "typed_api.py").read_text(encoding="utf-8"))
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    for index, code in enumerate(blocks):
        (folder / f"readme_block_{index}.py").write_text(code, encoding="utf-8")
    for page in RUNNABLE_PAGES:
        for index, code in enumerate(python_blocks(page.read_text(encoding="utf-8"))):
            (folder / f"{page.stem}_block_{index}.py").write_text(code, encoding="utf-8")
    (folder / "public_models.py").write_text(public_model_calls(), encoding="utf-8")
    (folder / "pyrightconfig.json").write_text(json.dumps(PYRIGHT_CONFIG), encoding="utf-8")
    return folder


def checked(command: list[str], cwd: Path) -> str:
    """Run a checker; its output, or a failure showing it."""
    env = {**os.environ, "MYPYPATH": str(ROOT), "NO_COLOR": "1"}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(command[:3])} ... failed:\n{output}"
    return output


def test_the_sources_hold_every_readme_block_and_every_public_model(sources: Path) -> None:
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert len(list(sources.glob("readme_block_*.py"))) == len(blocks) >= 3
    for page in RUNNABLE_PAGES:
        assert list(sources.glob(f"{page.stem}_block_*.py"))
    calls = (sources / "public_models.py").read_text(encoding="utf-8")
    for needed in ("config.MemoryConfig()", "RuntimeConfig()", "RunResult(run_id=_any, new"):
        assert needed in calls


def test_mypy_accepts_the_typed_api_the_readme_and_the_models(sources: Path) -> None:
    # The project's config and cache: `make lint` has just checked the package itself.
    checked(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            str(sources),
        ],
        ROOT,
    )


def test_basedpyright_accepts_the_typed_api_the_readme_and_the_models(sources: Path) -> None:
    config = sources / "pyrightconfig.json"
    output = checked(
        [sys.executable, "-m", "basedpyright", "-p", str(config), "--pythonpath", sys.executable],
        sources,
    )
    assert "0 errors" in output


def test_no_field_default_is_given_positionally() -> None:
    """`Field(None, ge=1)` is a default only pydantic sees: `Field(default=None, ge=1)`."""
    found = []
    for path in sorted((ROOT / "agent_runtime").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name == "Field":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
