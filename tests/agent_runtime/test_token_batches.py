"""The tokens of a loop step reach each subscription as one batch: every subscription still
gets every event in the order it was made, within its bound, from the moment it began."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from collections.abc import AsyncIterator
from typing import Any

from agent_runtime import Runtime
from agent_runtime.agent._step_batch import step_batch
from agent_runtime.event_stream import Subscription
from agent_runtime.events import Event, EventsDropped, MessageUpdate, TurnStart
from agent_runtime.llm import ChatRequest
from agent_runtime.memory import MemoryPolicy
from agent_runtime.messages import ToolCall
from agent_runtime.testing import FunctionModel, ScriptedModel, ScriptedTurn
from agent_runtime.tools import ToolContext, tool

TOKENS = 200  # one step of the run: a scripted answer streams without waiting


def read_in_thread(sub: Subscription, sizes: list[int] | None = None) -> Any:
    """A thread reading `sub` to the end of its next run, one event at a time; when `sizes`
    is given, the buffer's size is recorded at each take. The function returned joins it
    and gives what it read."""
    got: list[Event] = []

    def read() -> None:
        for event in sub.until_end(timeout=10):
            if sizes is not None:
                sizes.append(sub.stream.stats().queue_size + 1)  # the one just taken too
            got.append(event)

    reader = threading.Thread(target=read)
    reader.start()

    def joined() -> list[Event]:
        reader.join(15)
        assert not reader.is_alive()
        return got

    return joined


def test_every_subscription_gets_every_event_in_order_within_its_bound(
    runtime: Runtime,
) -> None:
    model = ScriptedModel([ScriptedTurn(chunks=["t"] * TOKENS)])
    agent = runtime.start_agent(("s", "main", 0), model=model, memory=MemoryPolicy.none())
    narrow = agent.subscribe(max_queue=2, overflow="block")  # the run waits for its reader
    wide = agent.subscribe(max_queue=10_000, overflow="block")
    dropping = agent.subscribe(max_queue=10_000, overflow="drop_newest")
    sizes: list[int] = []
    readers = [read_in_thread(narrow, sizes), read_in_thread(wide), read_in_thread(dropping)]
    agent.run("go", timeout=10)
    seen = [joined() for joined in readers]
    for events in seen:
        assert not any(isinstance(e, EventsDropped) for e in events)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.seq for e in seen[0]] == [e.seq for e in seen[1]] == [e.seq for e in seen[2]]
    updates = [e for e in seen[0] if isinstance(e, MessageUpdate)]
    assert len(updates) == TOKENS
    assert [u.message.text for u in updates[:3]] == ["t", "tt", "ttt"]
    assert max(sizes) <= 2 + 1  # its bound (a run's terminal takes no space, may come on top)


def test_a_full_block_subscription_holds_the_run_and_loses_nothing(runtime: Runtime) -> None:
    model = ScriptedModel([ScriptedTurn(chunks=["t"] * TOKENS)])
    agent = runtime.start_agent(("s", "main", 0), model=model, memory=MemoryPolicy.none())
    with agent.subscribe(max_queue=5, overflow="block") as sub:
        agent.prompt("go")
        taken: list[Event] = []
        while not taken or taken[-1].type != "agent_end":
            batch = sub.stream.pull_many(1, timeout=10)  # one at a time: the run waits
            assert sub.stream.stats().queue_size <= 5
            taken.extend(batch)
    assert sum(isinstance(e, MessageUpdate) for e in taken) == TOKENS
    assert [e.seq for e in taken] == list(range(1, len(taken) + 1))


def test_a_subscription_made_mid_step_gets_the_tokens_made_after_it_and_none_before(
    runtime: Runtime,
) -> None:
    late: list[Subscription] = []
    holder: dict[str, Any] = {}

    async def stream(_request: ChatRequest) -> AsyncIterator[str]:
        yield "a"
        yield "b"
        # No await in between: "a" and "b" are gathered, not yet handed out. Subscribing on
        # the loop's thread takes effect at once.
        late.append(holder["agent"].subscribe())
        yield "c"
        yield "d"

    agent = runtime.start_agent(("s", "main", 0), model=FunctionModel(stream))
    holder["agent"] = agent
    with agent.subscribe() as early:
        agent.run("go", timeout=10)
        first = list(early.until_end(timeout=5))
    with late[0] as second:
        after = list(second.until_end(timeout=5))

    def deltas(events: list[Event]) -> list[str]:
        return [e.delta.delta for e in events if isinstance(e, MessageUpdate)]

    assert deltas(first) == ["a", "b", "c", "d"]
    assert deltas(after) == ["c", "d"]
    assert [e.seq for e in after] == list(range(after[0].seq, after[0].seq + len(after)))
    assert [(e.seq, e.type) for e in first if e.seq >= after[0].seq] == [
        (e.seq, e.type) for e in after
    ]


def test_a_delegate_s_tokens_and_its_parent_s_events_keep_their_order(
    runtime: Runtime,
) -> None:
    """Tokens of two agents of one loop, gathered in one step, reach a subscription that
    gets both (the parent's) in the order they were made."""

    @tool
    async def ask_child(ctx: ToolContext) -> str:
        """Ask the child."""
        child = await ctx.aspawn("child", model=ScriptedModel([ScriptedTurn(chunks=list("xyz"))]))
        result = await child.arun("hi")
        return result.text

    call = ToolCall(id="c1", name="ask_child", arguments={})
    parent_model = ScriptedModel(
        [ScriptedTurn(chunks=list("ab"), tool_calls=[call]), ScriptedTurn(chunks=list("cd"))]
    )
    parent = runtime.start_agent(("s", "main", 0), model=parent_model, tools=[ask_child])
    with parent.subscribe() as sub:
        parent.run("go", timeout=10)
        events = list(sub.until_end(timeout=5, run_id=None))
    text = [e for e in events if isinstance(e, MessageUpdate) and e.delta.kind == "text"]
    mine = [e.delta.delta for e in text if e.agent == parent.key]
    theirs = [e.delta.delta for e in text if e.agent != parent.key]
    assert mine == list("abcd") and theirs == list("xyz")
    kinds = [(e.agent == parent.key, e.type) for e in events]
    child_span = [i for i, (own, _) in enumerate(kinds) if not own]
    tool_end = next(i for i, e in enumerate(events) if e.type == "tool_execution_end")
    assert max(child_span) < tool_end  # the child's whole run, tokens too, before the result


def test_a_loop_that_gathered_tokens_is_freed_once_closed() -> None:
    """The batches are kept by loop; that must not keep the loops alive."""

    class Source:
        subscriptions: tuple[Any, ...] = ()
        parent = None

    loops = []
    for _ in range(3):
        loop = asyncio.new_event_loop()

        async def gather() -> None:
            step_batch(asyncio.get_running_loop()).add(Source(), TurnStart(seq=1))

        loop.run_until_complete(gather())
        loop.close()
        loops.append(weakref.ref(loop))
        del loop
    gc.collect()
    assert [ref() for ref in loops] == [None, None, None]
