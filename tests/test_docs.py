"""docs/ and README.md hold together for a reader of the repository alone: every relative
link (and its #anchor) resolves, nothing points at files users do not have, the event
reference names every event, and the pages whose examples are whole programs run them as
written (README.md's are run by test_readme.py)."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest

from agent_runtime.events import Event
from tests.test_readme import python_blocks, run_as_written

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
# docs/ pages whose ```python blocks are whole programs, run offline here and read by both
# type checkers in tests/typing (the other pages show fragments of a program).
RUNNABLE_PAGES = [ROOT / "docs" / "approvals.md"]
RUNNABLE_BLOCKS = [
    (page, index)
    for page in RUNNABLE_PAGES
    for index in range(len(python_blocks(page.read_text(encoding="utf-8"))))
]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}


def test_slug_follows_github() -> None:
    assert slug("A local llama.cpp server") == "a-local-llamacpp-server"
    assert slug("`[llm.profiles.NAME]`") == "llmprofilesname"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(page: Path) -> None:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    for target in LINK.findall(text):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{page.name} links to {target}: no such file"
        if anchor and file.suffix == ".md":
            assert anchor in anchors(file), f"{page.name} links to {target}: no such heading"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_reference_to_files_users_do_not_have(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for name in ("DESIGN.md", "STYLE.md", "../shared"):
        assert name not in text, f"{page.name} mentions {name}, which users never have"


def test_the_event_reference_names_every_event() -> None:
    text = (ROOT / "docs" / "events.md").read_text(encoding="utf-8")
    union = typing.get_args(typing.get_args(Event)[0])
    assert len(union) >= 16
    for event in union:
        kind = event.model_fields["type"].default
        assert f"| `{kind}` | `{event.__name__}` |" in text, event.__name__


@pytest.mark.parametrize(
    ("page", "index"), RUNNABLE_BLOCKS, ids=lambda v: v.name if isinstance(v, Path) else str(v)
)
def test_a_whole_program_in_a_page_runs_as_written(page: Path, index: int, tmp_path: Path) -> None:
    code = python_blocks(page.read_text(encoding="utf-8"))[index]
    run_as_written(code, tmp_path, f"{page.relative_to(ROOT)} block {index}")
