"""The exception tree as a caller meets it: one root for every condition of the library's own,
drawn in `agent_runtime._errors`, and messages that say what to do."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator

import pytest

import agent_runtime
from agent_runtime import AgentBusy, AgentRuntimeError, Runtime, _errors
from agent_runtime.abort import Aborted, AbortSignal
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.mcp import McpServerError
from agent_runtime.testing import ScriptedModel, ScriptedTurn


def public_modules() -> Iterator[str]:
    """Every module of agent_runtime whose dotted name has no private (`_`) part."""
    yield agent_runtime.__name__
    for info in pkgutil.walk_packages(agent_runtime.__path__, f"{agent_runtime.__name__}."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            yield info.name


def exported_exceptions() -> dict[str, type[BaseException]]:
    """The exception classes of agent_runtime that a public module exports (warnings aside)."""
    found: dict[str, type[BaseException]] = {}
    for name in public_modules():
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if (
                not attr.startswith("_")
                and inspect.isclass(value)
                and issubclass(value, BaseException)
                and not issubclass(value, Warning)
                and value.__module__.startswith("agent_runtime")
            ):
                found[f"{name}.{attr}"] = value
    return found


def test_every_exception_a_public_module_exports_is_an_agent_runtime_error() -> None:
    exported = exported_exceptions()
    assert len(exported) > 40  # the walk did find the modules (llm, tools, workflows, ...)
    outside = sorted(
        path for path, cls in exported.items() if not issubclass(cls, AgentRuntimeError)
    )
    assert outside == []


def test_aborted_and_mcp_server_error_are_caught_by_the_root() -> None:
    signal = AbortSignal()
    signal.abort("user_abort")
    with pytest.raises(AgentRuntimeError, match="aborted: user_abort"):
        signal.raise_if_aborted()
    assert issubclass(Aborted, AgentRuntimeError)
    assert issubclass(McpServerError, AgentRuntimeError)


def test_the_tree_in_the_docstring_names_every_exported_exception() -> None:
    doc = _errors.__doc__ or ""
    drawn = {word.strip("(),") for word in doc.split()}
    missing = sorted({cls.__name__ for cls in exported_exceptions().values()} - drawn)
    assert missing == []


def test_agent_busy_says_what_the_caller_can_do() -> None:
    config = RuntimeConfig(memory=MemoryConfig(store="memory"))
    with Runtime.start(config) as runtime:
        agent = runtime.start_agent(
            ("s", "a", 0), model=ScriptedModel([ScriptedTurn(text="late", delay=30.0)])
        )
        run_id = agent.prompt("first")
        with pytest.raises(AgentBusy) as busy:
            agent.prompt("second")
        agent.abort()
        agent.wait_for_idle(timeout=10)
    message = str(busy.value)
    assert busy.value.run_id == run_id and run_id in message
    for way_out in ("steer()", "follow_up()", "wait_for_idle()", "abort()"):
        assert way_out in message
