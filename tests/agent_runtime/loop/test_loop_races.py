"""Edges of a run's end: closing the generator mid-run, late aborts, deadlines, foreign models."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent_runtime.abort import AbortSignal
from agent_runtime.events import (
    AgentEnd,
    Canceled,
    Event,
    MessageEnd,
    MessageStart,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
)
from agent_runtime.llm.types import ChatRequest, ModelInfo, StreamChunk, TextDelta
from agent_runtime.loop import AgentContext, LoopConfig, run, validate_transcript
from agent_runtime.messages import AssistantMessage, Message, UserMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn
from agent_runtime.tools import ToolContext, tool
from tests.agent_runtime.loop.helpers import (
    call,
    calls_turn,
    committed,
    daemon_run_sync,
    drive,
    results_of,
)


def steering_queue(*texts: str) -> tuple[list[Message], Any]:
    queue: list[Message] = [UserMessage(content=t) for t in texts]

    def take() -> list[Message]:
        taken = list(queue)
        queue.clear()
        return taken

    return queue, take


# -- closing the generator -----------------------------------------------------------------------


def test_closing_the_run_mid_batch_cancels_tools_and_closes_their_contexts() -> None:
    cancelled = threading.Event()
    contexts: dict[str, ToolContext] = {}
    release = threading.Event()

    @tool(parallel_safe=True)
    async def waits(ctx: ToolContext) -> str:
        """Async; waits until cancelled."""
        contexts["a"] = ctx
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    @tool(parallel_safe=True)
    def chatty(ctx: ToolContext) -> str:
        """Sync; keeps reporting progress until released."""
        contexts["s"] = ctx
        while not release.wait(0.005):
            ctx.update("tick")
        return "late"

    updates: list[Any] = []
    closed_at_once: list[bool] = []

    async def main() -> set[asyncio.Task[Any]]:
        model = ScriptedModel([calls_turn(call("a", "waits"), call("s", "chatty"))])
        config = LoopConfig(model=model, run_sync=daemon_run_sync)
        events = run([UserMessage(content="go")], AgentContext(tools=[waits, chatty]), config)
        started = 0
        async for event in events:
            if isinstance(event, ToolExecutionStart):
                started += 1
            if isinstance(event, ToolExecutionUpdate):
                break  # both started, the sync one is reporting
        await events.aclose()  # type: ignore[attr-defined]
        # Closed by the time aclose returns (the caller may close the event loop next).
        closed_at_once.extend(ctx.closed for ctx in contexts.values())
        contexts["s"]._on_update = updates.append  # any update from here on would show
        await asyncio.sleep(0.05)
        return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}

    try:
        left = asyncio.run(main())
    finally:
        release.set()
    assert left == set()
    assert closed_at_once == [True, True]
    assert cancelled.is_set()
    assert contexts["a"].closed and contexts["s"].closed
    assert updates == []


def test_closing_the_run_hands_back_steering_not_yet_delivered() -> None:
    def close_at(kind: type[Event]) -> list[Message]:
        _, take = steering_queue("steer")
        handed: list[Message] = []

        async def main() -> None:
            config = LoopConfig(
                model=ScriptedModel(["x"]),
                get_steering_messages=take,
                on_undelivered_steering=handed.extend,
            )
            events = run([UserMessage(content="go")], AgentContext(), config)
            async for event in events:
                message = getattr(event, "message", None)
                if isinstance(event, kind) and getattr(message, "text", "") == "steer":
                    break
            await events.aclose()  # type: ignore[attr-defined]

        asyncio.run(main())
        return handed

    # Closed at its MessageStart: not delivered, handed back. At its MessageEnd: delivered.
    assert [m.text for m in close_at(MessageStart)] == ["steer"]  # type: ignore[attr-defined]
    assert close_at(MessageEnd) == []


# -- late aborts ---------------------------------------------------------------------------------


def test_an_abort_after_the_last_answer_cancels_and_leaves_follow_ups_queued() -> None:
    follow, take = steering_queue("later")
    events = drive(
        ScriptedModel(["answer"]),
        get_follow_up_messages=take,
        abort_when=lambda e: isinstance(e, TurnEnd),
    )
    assert isinstance(events[-1], Canceled)
    assert [m.text for m in follow] == ["later"]  # type: ignore[attr-defined]
    assert [m.text for m in committed(events)] == ["go", "answer"]  # type: ignore[union-attr]


def test_follow_ups_taken_as_the_run_is_aborted_are_handed_back_as_follow_ups() -> None:
    signal = AbortSignal()
    steering: list[Message] = []
    follow_ups: list[Message] = []

    def take_follow_ups() -> list[Message]:
        signal.abort("user_abort")  # lands between taking and delivering
        return [UserMessage(content="next")]

    events = drive(
        ScriptedModel(["answer"]),
        signal=signal,
        get_follow_up_messages=take_follow_ups,
        on_undelivered_steering=steering.extend,
        on_undelivered_follow_ups=follow_ups.extend,
    )
    assert isinstance(events[-1], Canceled)
    assert steering == [] and [m.text for m in follow_ups] == ["next"]  # type: ignore[attr-defined]


@pytest.mark.timing
def test_a_tool_finishing_at_the_grace_deadline_gets_exactly_one_result() -> None:
    grace = 0.03

    @tool
    def racer(ctx: ToolContext) -> str:
        """Reports progress until just about the grace deadline, then returns."""
        ctx.update("start")
        ctx.signal.wait(5)
        until = time.monotonic() + grace
        while time.monotonic() < until:
            ctx.update("tick")
        return "finished"

    outcomes = set()
    for _ in range(15):
        events = drive(
            ScriptedModel([calls_turn(call("r", "racer"))]),
            [racer],
            abort_when=lambda e: isinstance(e, ToolExecutionUpdate),
            abort_grace=grace,
        )
        ends = [i for i, e in enumerate(events) if isinstance(e, ToolExecutionEnd)]
        assert len(ends) == 1
        assert not any(isinstance(e, ToolExecutionUpdate) for e in events[ends[0] :])
        (result,) = results_of(events)
        outcomes.add((result.details or {}).get("outcome", "finished"))
        assert isinstance(events[-1], Canceled)
        assert validate_transcript(committed(events)) == []
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert outcomes <= {"finished", "unknown"}


# -- a foreign ChatModel -------------------------------------------------------------------------


class DeafModel:
    """A ChatModel that is not a BaseChatModel and ignores `signal`: it hangs after one chunk."""

    info = ModelInfo(provider="deaf", model="deaf")

    def __init__(self) -> None:
        self.hanging = threading.Event()  # its stream is in the 30 s sleep
        self.closed = False  # its stream was closed while it hung
        self.woke = False  # it hung for the whole 30 s: nobody closed it

    def stream(
        self, request: ChatRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StreamChunk]:
        async def chunks() -> AsyncIterator[StreamChunk]:
            yield TextDelta(text="hel")
            self.hanging.set()
            try:
                await asyncio.sleep(30)
            except BaseException:  # cancelled, or closed by aclose()
                self.closed = True
                raise
            self.woke = True
            yield TextDelta(text="lo")

        return chunks()

    # The rest of the ChatModel protocol, unused by the loop.
    async def generate(self, request: ChatRequest, **_: Any) -> Any:
        raise NotImplementedError

    async def prompt(self, text: str, system: str | None = None, **_: Any) -> str:
        raise NotImplementedError

    def generate_sync(self, request: ChatRequest, **_: Any) -> Any:
        raise NotImplementedError

    def prompt_sync(self, text: str, system: str | None = None, **_: Any) -> str:
        raise NotImplementedError


def test_a_chat_model_that_ignores_the_signal_is_still_closed_on_abort() -> None:
    model = DeafModel()
    signal = AbortSignal()

    def abort_once_it_hangs() -> None:
        if model.hanging.wait(10):
            signal.abort("user_abort")

    threading.Thread(target=abort_once_it_hangs, daemon=True).start()
    events = drive(model, signal=signal)  # type: ignore[arg-type]
    # Closed while it hung, not waited out: a run that waited would see the model wake.
    assert model.closed and not model.woke
    assert isinstance(events[-1], Canceled)
    last = [e.message for e in events if isinstance(e, MessageEnd)][-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "aborted"
    assert last.text == "hel"


def test_a_run_completes_normally_with_a_foreign_model() -> None:
    class Plain(DeafModel):
        def stream(
            self, request: ChatRequest, *, signal: AbortSignal | None = None
        ) -> AsyncIterator[StreamChunk]:
            return ScriptedModel([ScriptedTurn(chunks=["a", "b"])]).stream(request)

    events = drive(Plain())  # type: ignore[arg-type]
    assert isinstance(events[-1], AgentEnd)
    assert [m.text for m in events[-1].new_messages] == ["go", "ab"]  # type: ignore[union-attr]
