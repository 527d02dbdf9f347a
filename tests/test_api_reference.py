"""The API reference (docs/reference/, built by `make docs`) has an entry for every public name.

A public name is one listed in the `__all__` of a public module: a module or package of
`agent_runtime` or `supervisors` with no `_`-prefixed part in its dotted path (the
`agent-runtime` command's `agent_runtime.cli` aside: `--help` documents it). An entry is a
mkdocstrings line `::: dotted.path` in a page of docs/reference/; a name re-exported by several
modules is covered by one entry of the same object under the same name. No build and no network
here: the pages are read as text and the entries resolved by import (the strict build in
`make docs` then checks that each renders).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import agent_runtime
import supervisors

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"
ENTRY = re.compile(r"^::: *([\w.]+) *$", re.MULTILINE)
NOT_DOCUMENTED_HERE = {"agent_runtime.cli"}


def public_modules() -> Iterator[ModuleType]:
    """Every public module that lists its names in `__all__`."""
    for package in (agent_runtime, supervisors):
        yield package
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            parts = info.name.split(".")
            if any(part.startswith("_") for part in parts) or info.name in NOT_DOCUMENTED_HERE:
                continue
            module = importlib.import_module(info.name)
            if hasattr(module, "__all__"):
                yield module


def resolve(identifier: str) -> Any:
    """The object a dotted path names: the longest importable module prefix, then attributes."""
    parts = identifier.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target: Any = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            target = getattr(target, attribute)
        return target
    raise LookupError(identifier)


def entries() -> dict[str, str]:
    """Every entry of the reference pages: its dotted path -> the page holding it."""
    found: dict[str, str] = {}
    for page in sorted(REFERENCE.glob("*.md")):
        for identifier in ENTRY.findall(page.read_text(encoding="utf-8")):
            found[identifier] = page.name
    return found


PUBLIC = sorted(public_modules(), key=lambda m: m.__name__)


@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_every_public_name_has_an_entry_in_the_reference(module: ModuleType) -> None:
    documented = {(name.rpartition(".")[2], id(resolve(name))) for name in entries()}
    missing = [
        name
        for name in module.__all__
        if f"{module.__name__}.{name}" not in entries()
        and (name, id(getattr(module, name))) not in documented
    ]
    assert missing == [], (
        f"{module.__name__}.__all__ names without an entry in docs/reference/*.md: {missing} "
        f"(add a line `::: {module.__name__}.NAME` to the page of {module.__name__})"
    )


def test_every_entry_names_something_that_exists() -> None:
    broken = {}
    for identifier, page in entries().items():
        try:
            resolve(identifier)
        except (LookupError, AttributeError) as exc:
            broken[identifier] = f"{page}: {exc}"
    assert broken == {}


def test_the_reference_index_names_every_public_package() -> None:
    """The index says which modules are public: each public package has a page there."""
    index = (REFERENCE / "index.md").read_text(encoding="utf-8")
    packages = {m.__name__ for m in PUBLIC if hasattr(m, "__path__")}
    # llm.middleware and llm.providers are documented on the page of agent_runtime.llm.
    packages -= {"agent_runtime.llm.middleware", "agent_runtime.llm.providers"}
    absent = sorted(
        name
        for name in packages
        if not re.search(rf"[`.]{re.escape(name.rpartition('.')[2])}`", index)
    )
    assert absent == []


def test_the_package_docstring_names_every_public_module_of_its_own() -> None:
    """`agent_runtime` re-exports the common names only: its docstring says where the rest are."""
    doc = agent_runtime.__doc__ or ""
    top = {
        f"agent_runtime.{info.name}"
        for info in pkgutil.iter_modules(agent_runtime.__path__)
        if not info.name.startswith("_")
    }
    assert len(top) > 15
    absent = sorted(name for name in top if f"`{name}`" not in doc)
    assert absent == []


def test_ci_builds_the_site_strictly() -> None:
    """`.ci/run` runs `make docs`, whose build fails on a broken link or reference."""
    steps = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert "make docs" in steps
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\ndocs:", 1)[1].split("\n\n", 1)[0]
    assert "mkdocs build --strict" in recipe
