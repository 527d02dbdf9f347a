"""Session memory shared while agents run: each run starts from the session's current history
(what the session's other agents committed since is merged in, in commit order), an agent's
own messages are never doubled, a compaction is picked up, and reset keeps the past out."""

from __future__ import annotations

import threading

from agent_runtime import Agent, Runtime
from agent_runtime.loop import validate_transcript
from agent_runtime.memory import MemoryPolicy
from agent_runtime.messages import (
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    UserMessage,
)
from agent_runtime.testing import ScriptedModel, ScriptedTurn
from agent_runtime.tools import tool


def texts(messages: list[Message]) -> list[str]:
    out = []
    for m in messages:
        if isinstance(m, UserMessage):
            out.append(f"user:{m.text}")
        elif isinstance(m, AssistantMessage):
            out.append(f"assistant:{m.text}")
        else:
            out.append(f"result:{m.text}")
    return out


def summary() -> list[Message]:
    """What the tests compact a session to."""
    return [
        UserMessage(content="summary please"),
        AssistantMessage(content=[TextContent(text="we talked")], stop_reason="stop"),
    ]


def sent(model: ScriptedModel) -> list[str]:
    """What the model was sent in its last call."""
    return texts(model.requests[-1].messages)


def test_a_run_starts_from_what_the_session_s_other_agents_committed(runtime: Runtime) -> None:
    model_a = ScriptedModel(["a1", "a2"])
    model_b = ScriptedModel(["b1"])
    a = runtime.start_agent(("s", "a", 0), model=model_a)
    b = runtime.start_agent(("s", "b", 0), model=model_b)
    a.run("qa1", timeout=10)
    runtime.memory_writer.flush(10, session="s")
    b.run("qb1", timeout=10)
    assert sent(model_b) == ["user:qa1", "assistant:a1", "user:qb1"]
    runtime.memory_writer.flush(10, session="s")
    a.run("qa2", timeout=10)
    assert sent(model_a) == [
        "user:qa1",
        "assistant:a1",
        "user:qb1",
        "assistant:b1",
        "user:qa2",
    ]
    assert texts(a.state().messages) == [*sent(model_a), "assistant:a2"]  # nothing doubled


def test_merged_turns_keep_each_tool_call_with_its_results(runtime: Runtime) -> None:
    @tool
    def look(key: str) -> str:
        """Look up."""
        return key.upper()

    model_a = ScriptedModel(
        [ScriptedTurn(tool_calls=[ToolCall(id="c1", name="look", arguments={"key": "x"})]), "a1"]
    )
    model_b = ScriptedModel(["b1"])
    a = runtime.start_agent(("s", "a", 0), model=model_a, tools=[look])
    b = runtime.start_agent(("s", "b", 0), model=model_b)
    a.run("qa", timeout=10)
    runtime.memory_writer.flush(10, session="s")
    b.run("qb", timeout=10)
    request = model_b.requests[-1].messages
    assert validate_transcript(request) == []
    assert texts(request) == ["user:qa", "assistant:", "result:X", "assistant:a1", "user:qb"]


def test_an_agent_s_own_unflushed_messages_are_not_doubled_by_a_later_merge(
    runtime: Runtime,
) -> None:
    model_a = ScriptedModel(["a1", "a2", "a3"])
    a = runtime.start_agent(("s", "a", 0), model=model_a)
    for i in range(3):
        a.run(f"q{i}", timeout=10)  # its own appends may still be in flight at the next start
    runtime.memory_writer.flush(10, session="s")
    b = runtime.start_agent(("s", "b", 0), model=ScriptedModel(["b1"]))
    b.run("qb", timeout=10)
    runtime.memory_writer.flush(10, session="s")
    model_a.add("a4")
    a.run("q3", timeout=10)
    assert sent(model_a) == [
        "user:q0",
        "assistant:a1",
        "user:q1",
        "assistant:a2",
        "user:q2",
        "assistant:a3",
        "user:qb",
        "assistant:b1",
        "user:q3",
    ]


def test_after_a_compaction_the_next_run_starts_from_the_compacted_history(
    runtime: Runtime,
) -> None:
    model = ScriptedModel(["a1", "a2"])
    a = runtime.start_agent(("s", "a", 0), model=model)
    a.run("old question", timeout=10)
    runtime.memory_writer.flush(10, session="s")
    history = runtime.memory.history("s")
    runtime.memory.compact("s", summary(), history.sequence)
    a.run("new question", timeout=10)
    assert sent(model) == ["user:summary please", "assistant:we talked", "user:new question"]


def test_reset_keeps_what_the_session_held_out_of_the_next_run(runtime: Runtime) -> None:
    model = ScriptedModel(["a1", "a2"])
    a = runtime.start_agent(("s", "a", 0), model=model)
    a.run("before", timeout=10)
    a.reset()
    a.run("after", timeout=10)
    assert sent(model) == ["user:after"]


def test_after_a_reset_what_others_commit_is_merged_in_as_before(runtime: Runtime) -> None:
    model = ScriptedModel(["a1", "a2"])
    a = runtime.start_agent(("s", "a", 0), model=model)
    b = runtime.start_agent(("s", "b", 0), model=ScriptedModel(["b1", "b2"]))
    a.run("a before", timeout=10)
    b.run("b before", timeout=10)
    a.reset()
    b.run("b after", timeout=10)  # committed after the reset: the reset agent sees it
    a.run("a after", timeout=10)
    assert sent(model) == ["user:b after", "assistant:b2", "user:a after"]


def test_a_byte_window_bounds_what_an_agent_reads_of_its_session(runtime: Runtime) -> None:
    writer = runtime.start_agent(("s", "w", 0), model=ScriptedModel([f"w{i}" for i in range(20)]))
    for i in range(20):
        writer.run(f"q{i}", timeout=10)
    runtime.memory_writer.flush(10, session="s")
    one_turn = sum(
        len(m.model_dump_json().encode()) for m in runtime.memory.history("s").messages[-2:]
    )
    model = ScriptedModel(["r"])
    reader = runtime.start_agent(
        ("s", "r", 0),
        model=model,
        memory=MemoryPolicy.limited_window(max_bytes=one_turn * 3 + 10),
    )
    reader.run("mine", timeout=10)
    assert sent(model) == [
        "user:q17",
        "assistant:w17",
        "user:q18",
        "assistant:w18",
        "user:q19",
        "assistant:w19",
        "user:mine",
    ]


def test_an_agent_that_does_not_read_the_session_never_merges(runtime: Runtime) -> None:
    a = runtime.start_agent(("s", "a", 0), model=ScriptedModel(["a1"]))
    model = ScriptedModel(["b1"])
    b = runtime.start_agent(("s", "b", 0), model=model, memory=MemoryPolicy.write_only())
    a.run("qa", timeout=10)
    runtime.memory_writer.flush(10, session="s")
    b.run("qb", timeout=10)
    assert sent(model) == ["user:qb"]


def test_agents_of_one_session_running_at_once_each_keep_a_valid_history_with_no_doubles(
    runtime: Runtime,
) -> None:
    @tool
    def note(text: str) -> str:
        """Note something."""
        return text.upper()

    agents = []
    for i in range(3):
        turns: list[ScriptedTurn | str] = []
        for t in range(5):
            call = ToolCall(id=f"a{i}t{t}", name="note", arguments={"text": f"n{i}{t}"})
            turns += [ScriptedTurn(tool_calls=[call]), f"answer {i}.{t}"]
        agents.append(
            runtime.start_agent(("shared", "w", i), model=ScriptedModel(turns), tools=[note])
        )

    def work(agent: Agent, i: int) -> None:
        for t in range(5):
            agent.run(f"q {i}.{t}", timeout=20)

    threads = [threading.Thread(target=work, args=(a, i)) for i, a in enumerate(agents)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    runtime.memory_writer.flush(10, session="shared")
    stored = runtime.memory.history("shared").messages
    assert validate_transcript(stored) == []
    assert len(stored) == 3 * 5 * 4  # prompt, call, result, answer per turn: nothing lost
    for i, agent in enumerate(agents):
        history = agent.state().messages
        assert validate_transcript(history) == []
        keys = [m.model_dump_json() for m in history]
        assert len(keys) == len(set(keys)), f"agent {i} holds a message twice"
        mine = [m for m in history if isinstance(m, UserMessage) and m.text.startswith(f"q {i}.")]
        assert len(mine) == 5


def test_a_read_only_agent_keeps_its_own_turns_after_another_agent_s_compaction(
    runtime: Runtime,
) -> None:
    a = runtime.start_agent(("s", "a", 0), model=ScriptedModel(["a1"]))
    model = ScriptedModel(["r1", "r2"])
    reader = runtime.start_agent(("s", "r", 0), model=model, memory=MemoryPolicy.read_only())
    a.run("qa", timeout=10)
    runtime.memory_writer.flush(10, session="s")
    reader.run("qr", timeout=10)
    runtime.memory.compact("s", summary(), runtime.memory.history("s").sequence)
    reader.run("again", timeout=10)
    # Its own turn was never stored, so the compaction did not take it in: it stays its own.
    assert sent(model) == [
        "user:summary please",
        "assistant:we talked",
        "user:qr",
        "assistant:r1",
        "user:again",
    ]


def test_a_windowed_read_only_agent_sees_the_session_s_newest_turns_in_the_order_they_came(
    runtime: Runtime,
) -> None:
    writer = runtime.start_agent(("s", "w", 0), model=ScriptedModel([f"w{i}" for i in range(6)]))
    model = ScriptedModel([f"r{i}" for i in range(6)])
    policy = MemoryPolicy(read=True, write=False, last_n=6)
    reader = runtime.start_agent(("s", "r", 0), model=model, memory=policy)
    for i in range(6):
        writer.run(f"qw{i}", timeout=10)
        runtime.memory_writer.flush(10, session="s")
        reader.run(f"qr{i}", timeout=10)
        seen = sent(model)
        assert len(seen) == len(set(seen)), seen  # every text here is unique
        assert validate_transcript(model.requests[-1].messages) == []
        # the writer's newest turn, then the reader's prompt, in the order they happened
        assert seen[-3:] == [f"user:qw{i}", f"assistant:w{i}", f"user:qr{i}"], seen
        assert len(seen) == min(6, 4 * i + 2) + 1
    assert sent(model)[:4] == ["user:qw4", "assistant:w4", "user:qr4", "assistant:r4"]
