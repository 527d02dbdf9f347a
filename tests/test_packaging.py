"""The package as a user sees it: an SPDX licence backed by LICENSE, `__version__` from the
installed metadata, no development extras."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import agent_runtime

ROOT = Path(__file__).resolve().parent.parent


def _pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_license_is_an_spdx_string_backed_by_a_license_file() -> None:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    # The table form ({ text = "MIT" }) is deprecated by setuptools and warns on every build.
    assert project["license"] == "MIT"
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License")
    assert "Permission is hereby granted, free of charge" in text


def test_build_backend_understands_the_spdx_string() -> None:
    system = _pyproject()["build-system"]
    assert isinstance(system, dict)
    requires = [r for r in system["requires"] if r.startswith("setuptools")]
    assert len(requires) == 1
    match = re.fullmatch(r"setuptools>=(\d+)(\.\d+)*", requires[0])
    assert match is not None, requires[0]
    assert int(match.group(1)) >= 77  # the first setuptools that reads `license = "MIT"`


def test_version_is_the_installed_distributions() -> None:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    assert agent_runtime.__version__ == importlib.metadata.version("agent-runtime")
    assert agent_runtime.__version__ == project["version"]


def test_development_tools_are_a_dependency_group_not_an_extra() -> None:
    """`pip install agent-runtime[dev]` is not offered: the tools are PEP 735 groups."""
    extras = importlib.metadata.metadata("agent-runtime").get_all("Provides-Extra") or []
    assert "dev" not in extras
    assert "docs" not in extras
    groups = _pyproject()["dependency-groups"]
    assert isinstance(groups, dict)
    assert any(r.startswith("pytest") for r in groups["dev"])
    assert any(r.startswith("mkdocstrings") for r in groups["docs"])
