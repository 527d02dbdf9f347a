"""Every third-party module the packages import is a declared dependency (issue 11, item 24).

An import that only works because another package happens to pull it in (the adapters once
imported `typing_extensions`, which pydantic installs) breaks as soon as that package stops
doing so. A module counts as declared when its distribution is named in pyproject.toml, or is
pinned to one exact version by a declared distribution (`pydantic_core`: pydantic requires
`pydantic-core==<its own version>`, so the two are one dependency).
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent_runtime", "supervisors")


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match is not None, requirement
    return _normalized(match.group(1))


def declared_distributions() -> set[str]:
    """The distributions pyproject.toml names (extras included), plus those a named one pins
    to one exact version."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    declared = {_requirement_name(r) for r in requirements}
    for name in list(declared):
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for requirement in requires:
            if ";" not in requirement and re.search(r"==\s*[0-9]", requirement):
                declared.add(_requirement_name(requirement))
    return declared


def third_party_imports() -> dict[str, list[str]]:
    """Top-level module -> the files importing it, for every import (also in functions) of
    the packages that is neither the standard library nor one of the packages."""
    found: dict[str, list[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.partition(".")[0]
                    if top in sys.stdlib_module_names or top in PACKAGES or top == "__future__":
                        continue
                    found.setdefault(top, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_third_party_import_is_a_declared_dependency() -> None:
    providers = importlib.metadata.packages_distributions()
    declared = declared_distributions()
    undeclared = {
        module: files
        for module, files in third_party_imports().items()
        # A module of an extra not installed here (ray) is known by its own name.
        if not {_normalized(d) for d in providers.get(module, [module])} & declared
    }
    assert undeclared == {}, (
        "imported but not declared in pyproject.toml (declare it, or use the standard "
        f"library): {undeclared}"
    )
