"""Tool-call ids stay unique in the transcript whatever the provider sends (issue 11, item 5):
missing ids and ids reused per response no longer poison a run, a session, or its restarts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_runtime import Agent, Runtime
from agent_runtime.config import RuntimeConfig
from agent_runtime.events import AgentEnd
from agent_runtime.llm import openai_compatible
from agent_runtime.loop import RetryPolicy, validate_transcript
from agent_runtime.loop._call_ids import unique_call_ids
from agent_runtime.messages import AssistantMessage, TextContent, ToolCall, ToolResultMessage
from agent_runtime.testing import MockProviderServer, ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import tool
from tests.agent_runtime.loop.helpers import call, calls_turn, committed, drive, results_of

NO_RETRY = RetryPolicy(max_retries=0)


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def ids(message: AssistantMessage) -> list[str]:
    return [c.id for c in message.tool_calls]


# -- the rule ------------------------------------------------------------------------------------


def test_unique_ids_are_kept_and_the_message_is_not_copied() -> None:
    message = AssistantMessage(content=[call("toolu_1", "echo"), call("toolu_2", "echo")])
    assert unique_call_ids(message, {"toolu_0"}) is message


def test_missing_reused_and_repeated_ids_get_fresh_ones_that_keep_a_safe_prefix() -> None:
    message = AssistantMessage(
        content=[
            TextContent(text="three calls"),
            call("", "echo"),
            call("call_0", "echo"),
            call("functions.echo:0", "echo"),
            call("functions.echo:0", "echo"),
        ]
    )
    fixed = unique_call_ids(message, {"call_0", "functions.echo:0"})
    new = ids(fixed)
    assert len(set(new)) == 4 and not {"", "call_0", "functions.echo:0"} & set(new)
    assert new[0].startswith("call_") and new[1].startswith("call_0_")
    assert all(i.startswith("functions_echo_0_") for i in new[2:])
    assert all(c == "_" or c == "-" or c.isalnum() for i in new for c in i)
    assert fixed.content[0] == TextContent(text="three calls")
    assert [c.name for c in fixed.tool_calls] == ["echo"] * 4


@given(
    batch=st.lists(st.sampled_from(["", "a", "b", "call_0", "x" * 40]), max_size=6),
    taken=st.sets(st.sampled_from(["a", "b", "call_0", "z"])),
)
def test_after_the_rule_every_id_is_unique_and_new_to_the_transcript(
    batch: list[str], taken: set[str]
) -> None:
    message = AssistantMessage(content=[call(i, "echo") for i in batch])
    new = ids(unique_call_ids(message, taken))
    assert len(set(new)) == len(new) and not set(new) & taken and "" not in new
    kept = [old for old, now in zip(batch, new, strict=True) if old == now]
    assert kept == [i for n, i in enumerate(batch) if i and i not in taken and i not in batch[:n]]


# -- in a run ------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider_id", ["", "call_0"], ids=["omitted", "reused"])
def test_a_provider_that_omits_or_reuses_ids_does_not_break_the_run(provider_id: str) -> None:
    model = ScriptedModel(
        [
            calls_turn(call(provider_id, "echo", text="one")),
            calls_turn(call(provider_id, "echo", text="two"), call(provider_id, "echo", text="3")),
            "done",
        ]
    )
    events = drive(model, [echo], retry=NO_RETRY)
    assert isinstance(events[-1], AgentEnd)
    transcript = committed(events)
    assert validate_transcript(transcript) == []
    assert [r.text for r in results_of(events)] == ["one", "two", "3"]
    first = next(m for m in transcript if isinstance(m, AssistantMessage))
    if provider_id:
        assert ids(first) == ["call_0"]  # unique when it came: sent back as the provider said
    sent = model.requests[2].messages  # the third call carries the whole transcript
    assert validate_transcript(sent) == []


# -- in a session over the wire ---------------------------------------------------------------


@pytest.mark.parametrize("provider_id", ["", "call_0"], ids=["omitted", "reused"])
def test_ids_a_provider_omits_or_reuses_never_poison_the_session(provider_id: str) -> None:
    def tool_turn(text: str) -> ScriptedTurn:
        arguments = {"text": text}
        return ScriptedTurn(tool_calls=[ToolCall(id=provider_id, name="echo", arguments=arguments)])

    def start(runtime: Runtime, role: str) -> Agent:
        model = openai_compatible(server.base_url("openai"), "m")
        return runtime.start_agent(("s", role, 0), model=model, tools=[echo], retry=NO_RETRY)

    with MockProviderServer() as server:
        for text in ("a", "b", "c", "d"):
            server.enqueue(tool_turn(text), f"after {text}")
        with Runtime.start(RuntimeConfig()) as runtime:  # SQLite memory in the test's directory
            main = start(runtime, "main")
            assert main.run("go", timeout=10).text == "after a"
            assert main.run("again", timeout=10).text == "after b"
            assert start(runtime, "other").run("you too", timeout=10).text == "after c"
            wait_until(lambda: len(runtime.memory.history("s").messages) == 12, timeout=10)
        with Runtime.start(RuntimeConfig()) as runtime:  # a restart reads the stored session
            main = start(runtime, "main")
            assert main.run("and after a restart", timeout=10).text == "after d"
            history = main.state().messages
    assert validate_transcript(history) == []
    results = [m for m in history if isinstance(m, ToolResultMessage)]
    assert [r.text for r in results] == ["a", "b", "c", "d"]
    for request in server.requests:  # every transcript sent had unique call ids
        sent = [c["id"] for m in request.json["messages"] for c in m.get("tool_calls", [])]
        assert len(sent) == len(set(sent))
