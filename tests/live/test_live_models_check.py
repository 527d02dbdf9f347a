"""`agent-runtime models check` against the local llama.cpp server of `make test-live`.

Skipped unless `LIVE_LLAMA_URL` names the server's base URL (with /v1), as the live
tier's harness sets it; `LIVE_LLAMA_MODEL` is the id it serves (asked of the server
when unset).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from agent_runtime.cli import main
from agent_runtime.llm import llama_cpp

LIVE_URL = os.environ.get("LIVE_LLAMA_URL", "")
pytestmark = pytest.mark.skipif(
    not LIVE_URL, reason="needs a llama.cpp server: run `make test-live` (LIVE_LLAMA_URL)"
)


@pytest.fixture
def served() -> str:
    name = os.environ.get("LIVE_LLAMA_MODEL", "")
    if name:
        return name
    listed = asyncio.run(llama_cpp("", LIVE_URL).list_models())
    assert listed, "the live server lists no model"
    return listed[0]


def config(tmp_path: Path, model: str) -> Path:
    path = tmp_path / "runtime.toml"
    path.write_text(
        f'[llm.profiles.live]\nprovider = "openai_compatible"\nmodel = "{model}"\n'
        f'base_url = "{LIVE_URL}"\n'
    )
    return path


def test_the_served_model_passes(
    tmp_path: Path, served: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["--config", str(config(tmp_path, served)), "models", "check", "--profile", "live"])
        == 0
    )
    assert f"live  {served}" in capsys.readouterr().out


def test_a_model_the_server_does_not_serve_is_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config(tmp_path, "no-such-model")
    assert main(["--config", str(path), "models", "check", "--profile", "live"]) == 1
    assert "STALE" in capsys.readouterr().out
