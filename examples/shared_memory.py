"""Session memory shared by two agents, and kept across a restart of the process.

    python examples/shared_memory.py

Agents of one session share its history: each turn an agent commits is appended to the
session's store, and every run of another agent of the session starts from the session's
current history. Here a researcher learns a fact; the writer of the same session, started
later, sees it in its context. The store is SQLite (the default, in a temporary directory
here): a second runtime on the same file, as after a restart, starts the writer with the
whole history. An agent of another session sees none of it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from agent_runtime import Runtime
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.llm import ChatRequest
from agent_runtime.testing import FunctionModel, ScriptedModel


def what_i_know(request: ChatRequest) -> str:
    """The writer's model: it answers with what its context holds."""
    earlier = [m.text for m in request.messages[:-1] if m.text]
    return f"I see {len(earlier)} earlier messages; the last: {earlier[-1] if earlier else '-'}"


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        memory = MemoryConfig(store="sqlite", path=str(Path(folder) / "memory.sqlite3"))

        with Runtime.start(config=RuntimeConfig(memory=memory)) as runtime:
            researcher = runtime.start_agent(
                ("project-7", "researcher", 0),
                model=ScriptedModel(["The launch moved to 12 May."]),
            )
            researcher.run("When is the launch?", timeout=30)
            writer = runtime.start_agent(
                ("project-7", "writer", 0), model=FunctionModel(what_i_know)
            )
            print("writer:  ", writer.run("Draft the announcement", timeout=30).text)
            stranger = runtime.start_agent(
                ("project-8", "writer", 0), model=FunctionModel(what_i_know)
            )
            print("stranger:", stranger.run("Draft the announcement", timeout=30).text)

        # A new runtime on the same file, as after a restart of the process.
        with Runtime.start(config=RuntimeConfig(memory=memory)) as runtime:
            writer = runtime.start_agent(
                ("project-7", "writer", 0), model=FunctionModel(what_i_know)
            )
            print("restarted writer holds", len(writer.state().messages), "messages")
            print("writer:  ", writer.run("Shorter, please", timeout=30).text)


if __name__ == "__main__":
    main()
