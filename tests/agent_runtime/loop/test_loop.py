"""The stateless loop: event order, tool batches, steering, follow-ups, retry, abort, limits."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from agent_runtime.abort import AbortSignal
from agent_runtime.events import (
    AgentEnd,
    Canceled,
    CustomEvent,
    Error,
    Event,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ProviderRetry,
    ProviderRetryEnd,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from agent_runtime.llm import AuthenticationError, ProviderError, RateLimitError
from agent_runtime.loop import (
    AgentContext,
    LoopConfig,
    RetryPolicy,
    continue_run,
    validate_transcript,
)
from agent_runtime.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn
from agent_runtime.tools import ToolContext, tool
from tests.agent_runtime.loop.helpers import (
    call,
    calls_turn,
    committed,
    drive,
    names,
    results_of,
)

FAST_RETRY = RetryPolicy(base_delay=0.001, max_delay=0.01, jitter=0.0)


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


def test_text_only_run_emits_events_in_contract_order() -> None:
    events = drive(ScriptedModel([ScriptedTurn(chunks=["Hel", "lo"])]))
    assert names(events) == [
        "AgentStart",
        "TurnStart",
        "MessageStart",
        "MessageEnd",
        "MessageStart",
        "MessageUpdate",
        "MessageUpdate",
        "MessageEnd",
        "TurnEnd",
        "AgentEnd",
    ]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    end = events[-1]
    assert isinstance(end, AgentEnd)
    assert [type(m).__name__ for m in end.new_messages] == ["UserMessage", "AssistantMessage"]
    deltas = [e.delta.delta for e in events if isinstance(e, MessageUpdate)]
    assert deltas == ["Hel", "lo"]


def test_tool_turn_pairs_every_call_and_reports_results_in_turn_end() -> None:
    model = ScriptedModel([calls_turn(call("c1", "echo", text="a")), "done"])
    events = drive(model, [echo])
    kinds = names(events)
    assert (
        kinds.index("ToolExecutionStart") < kinds.index("ToolExecutionEnd") < kinds.index("TurnEnd")
    )
    turn_end = next(e for e in events if isinstance(e, TurnEnd))
    assert [r.tool_call_id for r in turn_end.tool_results] == ["c1"]
    assert turn_end.tool_results[0].text == "a"
    assert not validate_transcript(committed(events))
    second_request = model.requests[1]
    assert isinstance(second_request.messages[-1], ToolResultMessage)


def starts_and_ends(events: list[Event]) -> list[str]:
    """The tool events of a run as "start c0" / "end c0", in order."""
    out = []
    for e in events:
        if isinstance(e, ToolExecutionStart):
            out.append(f"start {e.tool_call_id}")
        elif isinstance(e, ToolExecutionEnd):
            out.append(f"end {e.tool_call_id}")
    return out


def test_tools_run_sequentially_by_default() -> None:
    started = {n: threading.Event() for n in range(3)}
    overlapped: list[int] = []

    @tool
    def step(n: int) -> int:
        """Step."""
        started[n].set()
        # Give a next call every chance to start now: in a correct run none does, and this
        # wait simply runs out (it never decides a pass, only makes a wrong run fail).
        if n + 1 in started and started[n + 1].wait(0.2):
            overlapped.append(n)
        return n

    model = ScriptedModel([calls_turn(*(call(f"c{i}", "step", n=i) for i in range(3))), "ok"])
    events = drive(model, [step])
    # Each call starts only after the one before it ended (a batch run together announces
    # every start before its first end).
    assert starts_and_ends(events) == [
        "start c0",
        "end c0",
        "start c1",
        "end c1",
        "start c2",
        "end c2",
    ]
    assert overlapped == []
    assert [r.tool_call_id for r in results_of(events)] == ["c0", "c1", "c2"]


def test_contiguous_parallel_safe_calls_run_together_up_to_the_limit() -> None:
    # Each group can only pass its barrier if all its calls run at once; a call that does
    # not make it in time breaks the barrier and its result is an error.
    first, second = threading.Barrier(3, timeout=5), threading.Barrier(2, timeout=5)
    lock = threading.Lock()
    active = [0]
    peak = [0]

    @tool(parallel_safe=True)
    def fetch(n: int) -> int:
        """Fetch."""
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        (first if n < 3 else second).wait()
        with lock:
            active[0] -= 1
        return n

    calls = [call(f"c{i}", "fetch", n=i) for i in range(5)]
    events = drive(ScriptedModel([calls_turn(*calls), "ok"]), [fetch], max_tool_concurrency=3)
    results = results_of(events)
    assert [r.tool_call_id for r in results] == [f"c{i}" for i in range(5)]
    assert not any(r.is_error for r in results), [r.text for r in results]
    # The second group starts only after the first ended: never more than the limit at once.
    tool_events = starts_and_ends(events)
    last_end_of_first = max(tool_events.index(f"end c{i}") for i in range(3))
    assert min(tool_events.index(f"start c{i}") for i in (3, 4)) > last_end_of_first
    assert peak[0] == 3


def test_a_sequential_call_is_a_barrier_between_parallel_groups() -> None:
    order: list[str] = []
    lock = threading.Lock()

    @tool(parallel_safe=True)
    def read(name: str) -> str:
        """Read."""
        time.sleep(0.02)
        with lock:
            order.append(f"read:{name}")
        return name

    @tool
    def write(name: str) -> str:
        """Write."""
        with lock:
            order.append(f"write:{name}")
        return name

    calls = [call("a", "read", name="a"), call("b", "read", name="b"), call("w", "write", name="w")]
    calls.append(call("c", "read", name="c"))
    drive(ScriptedModel([calls_turn(*calls), "ok"]), [read, write])
    assert order.index("write:w") == 2
    assert set(order[:2]) == {"read:a", "read:b"} and order[3] == "read:c"


def test_steering_skips_the_rest_of_the_batch_and_enters_before_the_next_call() -> None:
    queue: list[Message] = []

    @tool
    def step(n: int) -> int:
        """Step."""
        if n == 0:
            queue.append(UserMessage(content="change of plan"))
        return n

    def steering() -> list[Message]:
        taken = list(queue)
        queue.clear()
        return taken

    calls = [call(f"c{i}", "step", n=i) for i in range(3)]
    model = ScriptedModel([calls_turn(*calls), "ok"])
    events = drive(model, [step], get_steering_messages=steering)
    results = results_of(events)
    assert [r.tool_call_id for r in results] == ["c0", "c1", "c2"]
    assert not results[0].is_error
    assert [r.details["outcome"] for r in results[1:]] == ["skipped", "skipped"]  # type: ignore[index]
    assert [e.tool_call_id for e in events if isinstance(e, ToolExecutionStart)] == ["c0"]
    sent = model.requests[1].messages
    assert isinstance(sent[-1], UserMessage) and sent[-1].text == "change of plan"
    assert not validate_transcript(committed(events))


def test_steering_after_a_text_only_turn_calls_the_model_again() -> None:
    polls: list[int] = []

    def steering() -> list[Message]:
        polls.append(len(polls))
        # Nothing at the start; the message arrives while the first answer streams.
        return [UserMessage(content="one more thing")] if len(polls) == 2 else []

    model = ScriptedModel(["first", "second"])
    events = drive(model, get_steering_messages=steering)
    assert model.call_count == 2
    assert model.requests[1].messages[-1].text == "one more thing"  # type: ignore[union-attr]
    kinds = names(events)
    first_turn_end = kinds.index("TurnEnd")
    assert kinds[first_turn_end + 1 : first_turn_end + 4] == [
        "TurnStart",
        "MessageStart",
        "MessageEnd",
    ]
    end = events[-1]
    assert isinstance(end, AgentEnd)
    assert [m.text for m in end.new_messages] == ["go", "first", "one more thing", "second"]  # type: ignore[union-attr]


def test_follow_ups_start_a_new_turn_when_the_agent_would_stop() -> None:
    follow = [UserMessage(content="and then?")]

    def follow_ups() -> list[Message]:
        taken = list(follow)
        follow.clear()
        return taken

    model = ScriptedModel(["first", "second"])
    events = drive(model, get_follow_up_messages=follow_ups)
    assert model.call_count == 2
    assert names(events).count("TurnStart") == 2
    end = events[-1]
    assert isinstance(end, AgentEnd)
    assert [m.text for m in end.new_messages] == ["go", "first", "and then?", "second"]  # type: ignore[union-attr]


def test_retryable_failure_is_retried_and_never_committed() -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(
                text="par",
                tool_calls=[call("x", "echo", text="never")],
                error=ProviderError("boom"),
            ),
            "ok",
        ]
    )
    events = drive(model, [echo], retry=FAST_RETRY)
    assert isinstance(events[-1], AgentEnd)
    retry = next(e for e in events if isinstance(e, ProviderRetry))
    retry_end = next(e for e in events if isinstance(e, ProviderRetryEnd))
    assert retry.attempt == 1 and retry_end.outcome == "succeeded"
    assert names(events).index("ProviderRetry") < names(events).index("ProviderRetryEnd")
    assert not any(isinstance(e, ToolExecutionStart) for e in events)
    assert [m.text for m in events[-1].new_messages] == ["go", "ok"]  # type: ignore[union-attr]


def test_retry_after_hint_is_honoured_up_to_the_cap() -> None:
    model = ScriptedModel([ScriptedTurn(error=RateLimitError("slow", retry_after=0.05)), "ok"])
    events = drive(model, retry=RetryPolicy(base_delay=0.0, jitter=0.0, max_retry_after=0.01))
    retry = next(e for e in events if isinstance(e, ProviderRetry))
    assert retry.delay == pytest.approx(0.01)


def test_exhausted_retries_end_with_error() -> None:
    model = ScriptedModel([ScriptedTurn(error=ProviderError(f"e{i}")) for i in range(3)])
    events = drive(model, retry=RetryPolicy(max_retries=2, base_delay=0.0, jitter=0.0))
    assert isinstance(events[-1], Error) and "e2" in events[-1].reason
    assert [e.outcome for e in events if isinstance(e, ProviderRetryEnd)] == ["failed", "failed"]


def test_auth_errors_are_not_retried() -> None:
    model = ScriptedModel([ScriptedTurn(error=AuthenticationError("bad key")), "never"])
    events = drive(model, retry=FAST_RETRY)
    assert isinstance(events[-1], Error) and events[-1].reason.startswith("authentication_failed")
    assert model.call_count == 1


def test_an_empty_reply_is_an_error() -> None:
    events = drive(ScriptedModel([ScriptedTurn(text="")]))
    assert isinstance(events[-1], Error) and events[-1].reason == "empty_assistant_response"


def test_an_invalid_transcript_is_refused_before_the_provider_is_called() -> None:
    model = ScriptedModel(["never"])
    broken = [UserMessage(content="q"), AssistantMessage(content=[call("dangling", "echo")])]
    events = drive(model, history=broken, prompt="")
    assert isinstance(events[-1], Error)
    assert "invalid_transcript" in events[-1].reason and "dangling" in events[-1].reason
    assert model.call_count == 0


def test_max_tool_turns_ends_with_an_explanation_and_hands_back_steering() -> None:
    handed: list[Message] = []
    queue: list[Message] = []

    @tool
    def echo2(text: str) -> str:
        """Echo; the second call of the last allowed turn brings a steering message."""
        if text == "1a":
            queue.append(UserMessage(content="late steer"))
        return text

    def steering() -> list[Message]:
        taken = list(queue)
        queue.clear()
        return taken

    turns = [
        calls_turn(call("c0", "echo2", text="0")),
        calls_turn(call("c1a", "echo2", text="1a"), call("c1b", "echo2", text="1b")),
        calls_turn(call("c2", "echo2", text="2")),
    ]
    model = ScriptedModel(turns)
    events = drive(
        model,
        [echo2],
        max_tool_turns=2,
        get_steering_messages=steering,
        on_undelivered_steering=handed.extend,
    )
    end = events[-1]
    assert isinstance(end, AgentEnd)
    last = end.new_messages[-1]
    assert isinstance(last, AssistantMessage) and "max_tool_turns=2" in last.text
    assert model.call_count == 2
    # Taken at the boundary inside the last turn: not delivered, so handed back.
    assert [m.text for m in handed] == ["late steer"]  # type: ignore[attr-defined]
    assert not any(isinstance(m, UserMessage) and m.text == "late steer" for m in end.new_messages)
    assert not validate_transcript(end.new_messages)


def test_max_tool_turns_leaves_steering_it_did_not_take_in_the_queue() -> None:
    queue: list[Message] = []

    @tool
    def note() -> str:
        """Queues a steering message while it runs."""
        queue.append(UserMessage(content="queued"))
        return "ok"

    def steering() -> list[Message]:
        taken = list(queue)
        queue.clear()
        return taken

    events = drive(
        ScriptedModel([calls_turn(call("n", "note"))]),
        [note],
        max_tool_turns=1,
        get_steering_messages=steering,
    )
    assert isinstance(events[-1], AgentEnd)
    assert [m.text for m in queue] == ["queued"]  # type: ignore[attr-defined]


def test_tool_updates_become_execution_update_events() -> None:
    @tool
    def progress(ctx: ToolContext) -> str:
        """Progress."""
        ctx.update("half")
        ctx.update("most")
        return "all"

    events = drive(ScriptedModel([calls_turn(call("p", "progress")), "ok"]), [progress])
    updates = [e for e in events if isinstance(e, ToolExecutionUpdate)]
    assert [u.partial.content[0].text for u in updates] == ["half", "most"]  # type: ignore[union-attr]
    kinds = names(events)
    assert (
        kinds.index("ToolExecutionStart")
        < kinds.index("ToolExecutionUpdate")
        < kinds.index("ToolExecutionEnd")
    )


def test_emitted_events_come_in_order_with_the_calls_updates_and_the_runs_identity() -> None:
    @tool
    def report(ctx: ToolContext) -> str:
        """Report."""
        ctx.emit("phase", {"name": "read"})
        ctx.update("half")
        ctx.emit("phase", {"name": "write"})
        return "all"

    events = drive(ScriptedModel([calls_turn(call("r", "report")), "ok"]), [report], run_id="run-7")
    kinds = names(events)
    start, end = kinds.index("ToolExecutionStart"), kinds.index("ToolExecutionEnd")
    assert kinds[start + 1 : end] == ["CustomEvent", "ToolExecutionUpdate", "CustomEvent"]
    custom = [e for e in events if isinstance(e, CustomEvent)]
    assert [(e.name, e.data) for e in custom] == [
        ("phase", {"name": "read"}),
        ("phase", {"name": "write"}),
    ]
    assert all(e.run_id == "run-7" for e in custom)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def test_an_async_tool_emits_too() -> None:
    @tool
    async def report(ctx: ToolContext) -> str:
        """Report."""
        ctx.emit("tick", 1)
        await asyncio.sleep(0)
        ctx.emit("tick", 2)
        return "all"

    events = drive(ScriptedModel([calls_turn(call("r", "report")), "ok"]), [report])
    assert [e.data for e in events if isinstance(e, CustomEvent)] == [1, 2]


def test_each_direct_run_gets_a_fresh_run_id_on_every_event() -> None:
    first = drive(ScriptedModel(["a"]))
    second = drive(ScriptedModel(["b"]))
    (first_id,) = {e.run_id for e in first}
    (second_id,) = {e.run_id for e in second}
    assert first_id and second_id and first_id != second_id


def test_a_run_id_in_the_config_is_kept() -> None:
    events = drive(ScriptedModel(["a"]), run_id="given")
    assert {e.run_id for e in events} == {"given"}


def test_continue_run_refuses_an_empty_or_assistant_ending_context() -> None:
    config = LoopConfig(model=ScriptedModel([]))
    with pytest.raises(ValueError, match="Cannot continue: no messages in context"):
        continue_run(AgentContext(), config)
    ctx = AgentContext(messages=[UserMessage(content="q"), AssistantMessage(content=[])])
    with pytest.raises(ValueError, match="Cannot continue from message role: assistant"):
        continue_run(ctx, config)


def test_continue_run_answers_a_context_ending_in_tool_results() -> None:
    history: list[Message] = [
        UserMessage(content="q"),
        AssistantMessage(content=[call("c1", "echo", text="x")], stop_reason="tool_use"),
        ToolResultMessage(tool_call_id="c1", tool_name="echo"),
    ]
    model = ScriptedModel(["answer"])
    config = LoopConfig(model=model)

    async def collect() -> list[object]:
        return [e async for e in continue_run(AgentContext(messages=history, tools=[echo]), config)]

    events = asyncio.run(collect())
    assert isinstance(events[-1], AgentEnd)
    assert [m.text for m in events[-1].new_messages] == ["answer"]  # type: ignore[union-attr]


# -- abort ---------------------------------------------------------------------------------------


@pytest.mark.timing
def test_abort_closes_a_hung_provider_stream_within_200ms() -> None:
    model = ScriptedModel([ScriptedTurn(chunks=["a", "b"], chunk_delay=30.0)])
    signal = AbortSignal()
    marks: dict[str, float] = {}

    def abort_soon(event: object) -> bool:
        if isinstance(event, MessageUpdate) and "abort" not in marks:
            marks["abort"] = time.monotonic()
            threading.Timer(0.01, signal.abort, args=("user_abort",)).start()
        return False

    events = drive(model, signal=signal, abort_when=abort_soon)
    elapsed = time.monotonic() - marks["abort"]
    assert isinstance(events[-1], Canceled) and events[-1].reason == "user_abort"
    assert elapsed < 0.01 + 0.2
    aborted = [e.message for e in events if isinstance(e, MessageEnd)][-1]
    assert isinstance(aborted, AssistantMessage) and aborted.stop_reason == "aborted"


def test_an_abort_while_the_consumer_holds_a_later_turn_start_ends_before_the_model_call() -> None:
    # An agent's run waits there for its turn of the event loop (agent/_loop_share.py): an
    # abort meanwhile must not deliver steering or call the model first.
    model = ScriptedModel([calls_turn(call("c1", "echo", text="x")), ScriptedTurn(text="no")])
    asked = {"steering": 0}

    def steering() -> list[Message]:  # none at the run's start, then one each time
        asked["steering"] += 1
        return [] if asked["steering"] == 1 else [UserMessage(content="also this")]

    seen = {"turn_start": 0}

    def at_second_turn_start(event: Event) -> bool:
        seen["turn_start"] += isinstance(event, TurnStart)
        return seen["turn_start"] == 2

    events = drive(model, [echo], abort_when=at_second_turn_start, get_steering_messages=steering)
    assert names(events)[-2:] == ["TurnStart", "Canceled"]
    assert model.call_count == 1
    delivered = [e for e in events if isinstance(e, MessageStart) and e.message.role == "user"]
    assert [m.message.content for m in delivered] == ["go"]  # the steering was not delivered


def test_abort_removes_incomplete_tool_calls_from_the_aborted_message() -> None:
    turn = ScriptedTurn(
        text="let me",
        tool_calls=[call("c1", "echo", text="x")],
        chunks=["let", " me"],
        chunk_delay=30.0,
    )
    signal = AbortSignal()
    events = drive(
        ScriptedModel([turn]),
        [echo],
        signal=signal,
        abort_when=lambda e: isinstance(e, MessageUpdate),
    )
    aborted = [e.message for e in events if isinstance(e, MessageEnd)][-1]
    assert isinstance(aborted, AssistantMessage) and aborted.tool_calls == []
    assert isinstance(events[-1], Canceled)
    assert not validate_transcript(committed(events))


@pytest.mark.timing
def test_a_tool_that_ignores_abort_is_abandoned_after_the_grace() -> None:
    release = threading.Event()

    @tool
    def stubborn(ctx: ToolContext) -> str:
        """Ignores the signal."""
        ctx.update("working")
        release.wait(10)
        return "late"

    model = ScriptedModel([calls_turn(call("s", "stubborn"), call("n", "echo", text="never"))])
    signal = AbortSignal()
    marks: dict[str, float] = {}

    def abort_on_update(event: object) -> bool:
        if isinstance(event, ToolExecutionUpdate):
            marks["abort"] = time.monotonic()
            return True
        return False

    try:
        events = drive(
            model, [stubborn, echo], signal=signal, abort_when=abort_on_update, abort_grace=0.1
        )
    finally:
        release.set()
    elapsed = time.monotonic() - marks["abort"]
    assert elapsed < 0.1 + 0.2
    results = {r.tool_call_id: r for r in results_of(events)}
    assert (
        results["s"].details["cancelled"] is True and results["s"].details["outcome"] == "unknown"
    )  # type: ignore[index]
    assert "working" in results["s"].text
    assert results["n"].details["outcome"] == "not_started"  # type: ignore[index]
    assert isinstance(events[-1], Canceled)
    kinds = names(events)
    assert kinds.index("TurnEnd") < kinds.index("Canceled")
    assert not validate_transcript(committed(events))


def test_a_cooperative_tool_finishes_within_the_grace_and_keeps_its_result() -> None:
    @tool
    def polite(ctx: ToolContext) -> str:
        """Stops on abort."""
        ctx.update("started")
        ctx.signal.wait(10)
        return "stopped cleanly"

    events = drive(
        ScriptedModel([calls_turn(call("p", "polite"))]),
        [polite],
        abort_when=lambda e: isinstance(e, ToolExecutionUpdate),
        abort_grace=2.0,
    )
    (result,) = results_of(events)
    assert result.text == "stopped cleanly" and not result.is_error
    assert isinstance(events[-1], Canceled)


@pytest.mark.timing
def test_abort_during_retry_backoff_ends_at_once() -> None:
    model = ScriptedModel([ScriptedTurn(error=ProviderError("down")), "never"])
    signal = AbortSignal()
    started = time.monotonic()
    events = drive(
        model,
        signal=signal,
        retry=RetryPolicy(base_delay=30.0, jitter=0.0),
        abort_when=lambda e: isinstance(e, ProviderRetry),
    )
    assert time.monotonic() - started < 1.0
    assert [e.outcome for e in events if isinstance(e, ProviderRetryEnd)] == ["aborted"]
    assert isinstance(events[-1], Canceled)
    assert model.call_count == 1


def test_steering_taken_but_not_delivered_is_handed_back_on_abort() -> None:
    handed: list[Message] = []
    signal = AbortSignal()
    polls = {"n": 0}

    def steering() -> list[Message]:
        polls["n"] += 1
        if polls["n"] == 2:  # after the text-only turn: taken, then the abort arrives
            signal.abort("user_abort")
            return [UserMessage(content="steer")]
        return []

    model = ScriptedModel(["first", "never"])
    events = drive(
        model, signal=signal, get_steering_messages=steering, on_undelivered_steering=handed.extend
    )
    assert isinstance(events[-1], Canceled)
    assert [m.text for m in handed] == ["steer"]  # type: ignore[attr-defined]
    assert model.call_count == 1


def test_every_started_call_has_one_end_event() -> None:
    @tool(parallel_safe=True)
    def work(n: int) -> int:
        """Work."""
        return n

    calls = [call(f"c{i}", "work", n=i) for i in range(6)]
    events = drive(ScriptedModel([calls_turn(*calls), "ok"]), [work], max_tool_concurrency=4)
    starts = [e.tool_call_id for e in events if isinstance(e, ToolExecutionStart)]
    ends = [e.tool_call_id for e in events if isinstance(e, ToolExecutionEnd)]
    assert sorted(starts) == sorted(ends) == sorted(c.id for c in calls)
