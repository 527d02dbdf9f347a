"""The AG-UI endpoint over real HTTP on 127.0.0.1: a `RunAgentInput` POST answered by AG-UI
events that ag-ui-protocol's own types parse, for a tool turn, a failure, an abort by the user
and a client that goes away; and the refusals (401/403/404/409/422)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("ag_ui", reason="needs ag-ui-protocol: pip install -e '.[server]'")
pytest.importorskip("uvicorn", reason="needs the server extra: pip install -e '.[server]'")

from ag_ui.core import AssistantMessage as AguiAssistantMessage
from ag_ui.core import Event as AguiEvent
from ag_ui.core import EventType, RunAgentInput
from ag_ui.core import UserMessage as AguiUserMessage
from ag_ui.encoder import EventEncoder
from pydantic import TypeAdapter

from agent_runtime import AgentKey, Runtime, ToolContext, tool
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.events import (
    Canceled,
    CustomEvent,
    Error,
    EventsDropped,
    ProviderRetry,
    TurnStart,
)
from agent_runtime.llm import (
    AuthenticationError,
    BaseChatModel,
    ChatRequest,
    ModelInfo,
    StreamChunk,
    TextDelta,
)
from agent_runtime.loop import RetryPolicy
from agent_runtime.messages import ToolCall
from agent_runtime.server._agui import routes
from agent_runtime.server._agui_mapping import AguiRun
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from tests.agent_runtime.server._protocol_app import (
    ADMIN,
    OTHER,
    PRINCIPALS,
    app_of,
    served,
    served_sharing_loop,
)

PARSE: TypeAdapter[Any] = TypeAdapter(AguiEvent)
KEY = AgentKey("s1", "helper", 0)


@pytest.fixture
def runtime(make_runtime: Callable[..., Runtime]) -> Runtime:
    return make_runtime(memory=MemoryConfig(store="memory"))


@pytest.fixture
def url(runtime: Runtime) -> Iterator[str]:
    with served(app_of(routes(runtime), PRINCIPALS)) as root:
        yield root


@tool
def add(a: int, b: int, *, ctx: ToolContext) -> int:
    """Add two numbers (and remember the sum in the session's state)."""
    ctx.session_state.put("last_sum", a + b)
    ctx.emit("added", {"sum": a + b})
    return a + b


def run_input(text: str = "add 2 and 3", **fields: Any) -> str:
    made = RunAgentInput(
        thread_id=fields.pop("thread_id", "thread-1"),
        run_id=fields.pop("run_id", "run-1"),
        messages=fields.pop("messages", [AguiUserMessage(id="u1", content=text)]),
        **fields,
    )
    return made.model_dump_json(by_alias=True)


def agui_url(root: str, key: AgentKey = KEY) -> str:
    return f"{root}/v1/agui/{key.session}/{key.role}/{key.index}"


def post_run(root: str, body: str, token: str | None = ADMIN, key: AgentKey = KEY) -> list[Any]:
    """The AG-UI events of a run, each parsed by the package's own `Event` union; asserts
    that each one is what the package itself would write for that event."""
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    events: list[Any] = []
    with httpx.stream(
        "POST", agui_url(root, key), content=body, headers=headers, timeout=30
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(parse(line.removeprefix("data: ")))
    return events


def parse(data: str) -> Any:
    """`data` parsed by the package's `Event` union; asserts that the package writes the
    parsed event back as exactly what we sent."""
    parsed = PARSE.validate_json(data)
    assert json.loads(parsed.model_dump_json(by_alias=True)) == json.loads(data)
    return parsed


def of_type(events: list[Any], kind: EventType) -> list[Any]:
    return [e for e in events if e.type == kind]


def tool_turn_model() -> ScriptedModel:
    call = ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})
    return ScriptedModel(
        [
            ScriptedTurn(chunks=["let me ", "add"], tool_calls=[call]),
            ScriptedTurn(chunks=["the sum", " is 5"]),
        ]
    )


def test_a_tool_turn_streams_as_agui_events_the_package_parses(runtime: Runtime, url: str) -> None:
    runtime.start_agent(KEY, model=tool_turn_model(), tools=[add])
    events = post_run(url, run_input(state={"mode": "math"}))
    kinds = [e.type for e in events]

    assert kinds[0] == EventType.RUN_STARTED
    assert (events[0].thread_id, events[0].run_id) == ("thread-1", "run-1")
    assert kinds[-1] == EventType.RUN_FINISHED
    assert (events[-1].thread_id, events[-1].run_id) == ("thread-1", "run-1")
    assert events[-1].result == "the sum is 5"
    # every event type the mapping emits for such a run, each parsed by the package's types
    assert set(kinds) == {
        EventType.RUN_STARTED,
        EventType.STATE_SNAPSHOT,
        EventType.STEP_STARTED,
        EventType.STEP_FINISHED,
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_ARGS,
        EventType.TOOL_CALL_END,
        EventType.TOOL_CALL_RESULT,
        EventType.CUSTOM,
        EventType.RUN_FINISHED,
    }
    starts = of_type(events, EventType.TEXT_MESSAGE_START)
    assert len(starts) == 2 and all(s.role == "assistant" for s in starts)
    for start in starts:
        deltas = [
            e.delta
            for e in of_type(events, EventType.TEXT_MESSAGE_CONTENT)
            if e.message_id == start.message_id
        ]
        assert "".join(deltas) in ("let me add", "the sum is 5")
    assert [e.delta for e in of_type(events, EventType.TEXT_MESSAGE_CONTENT)] == [
        "let me ",
        "add",
        "the sum",
        " is 5",
    ]
    (started,) = of_type(events, EventType.TOOL_CALL_START)
    assert (started.tool_call_id, started.tool_call_name) == ("c1", "add")
    assert started.parent_message_id == starts[0].message_id
    (args,) = of_type(events, EventType.TOOL_CALL_ARGS)
    assert json.loads(args.delta) == {"a": 2, "b": 3}
    (result,) = of_type(events, EventType.TOOL_CALL_RESULT)
    assert (result.tool_call_id, result.content) == ("c1", "5")
    assert kinds.index(EventType.TOOL_CALL_END) < kinds.index(EventType.TOOL_CALL_RESULT)
    (custom,) = of_type(events, EventType.CUSTOM)
    assert (custom.name, custom.value) == ("added", {"sum": 5})
    snapshots = [e.snapshot for e in of_type(events, EventType.STATE_SNAPSHOT)]
    assert snapshots == [{"mode": "math"}, {"mode": "math", "last_sum": 5}]
    assert runtime.memory.kv("s1").get("mode") == "math"


def test_only_the_trailing_user_messages_are_the_prompt(runtime: Runtime, url: str) -> None:
    model = ScriptedModel(["ok"])
    runtime.start_agent(KEY, model=model)
    history = [
        AguiUserMessage(id="u0", content="earlier question"),
        AguiAssistantMessage(id="a0", content="earlier answer"),
        AguiUserMessage(id="u1", content="first part"),
        AguiUserMessage(id="u2", content="second part"),
    ]
    post_run(url, run_input(messages=history))
    sent = [m.text for m in model.requests[0].messages]
    assert sent == ["first part", "second part"]


def test_a_failed_run_ends_with_run_error(runtime: Runtime, url: str) -> None:
    model = ScriptedModel([ScriptedTurn(chunks=["par"], error=AuthenticationError("bad key"))])
    runtime.start_agent(KEY, model=model, retry=RetryPolicy(max_retries=0))
    events = post_run(url, run_input())
    assert events[-1].type == EventType.RUN_ERROR
    assert events[-1].code == "run_failed"
    assert "bad key" in events[-1].message
    assert not of_type(events, EventType.RUN_FINISHED)
    # the partial text message was closed before the error
    assert of_type(events, EventType.TEXT_MESSAGE_END)


class HangingModel(BaseChatModel):
    """Streams one chunk, then hangs until cancelled (and records that)."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(provider="test", model="hanging")

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        try:
            yield TextDelta(text="thinking")
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        yield TextDelta(text="never")  # pragma: no cover


def stream_until_content(root: str, then: Any) -> list[Any]:
    """Read a run's events up to its first text delta, call `then()`, read on to the end."""
    events: list[Any] = []
    headers = {"authorization": f"Bearer {ADMIN}", "content-type": "application/json"}
    with httpx.stream(
        "POST", agui_url(root), content=run_input(), headers=headers, timeout=30
    ) as response:
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            events.append(parse(line.removeprefix("data: ")))
            if events[-1].type == EventType.TEXT_MESSAGE_CONTENT and then() == "close":
                break
    return events


def test_a_run_aborted_by_the_user_finishes_cancelled(runtime: Runtime, url: str) -> None:
    model = HangingModel()
    agent = runtime.start_agent(KEY, model=model)
    events = stream_until_content(url, lambda: agent.abort())
    assert events[-1].type == EventType.RUN_FINISHED
    assert events[-1].outcome.type == "cancelled"
    assert model.cancelled.is_set()


def test_a_client_that_goes_away_aborts_the_run(runtime: Runtime, url: str) -> None:
    model = HangingModel()
    agent = runtime.start_agent(KEY, model=model)
    events = stream_until_content(url, lambda: "close")
    assert events[-1].type == EventType.TEXT_MESSAGE_CONTENT
    wait_until(model.cancelled.is_set, timeout=10, what="the model call was cancelled")
    wait_until(lambda: not agent.state().is_running, timeout=10, what="the run ended")


# --- refusals ---------------------------------------------------------------------------------


def post_raw(
    root: str, body: str, token: str | None = ADMIN, key: AgentKey = KEY
) -> httpx.Response:
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    return httpx.post(agui_url(root), content=body, headers=headers, timeout=30)


def test_without_a_principal_it_answers_401_and_for_another_session_403(
    runtime: Runtime, url: str
) -> None:
    model = ScriptedModel(["never"])
    runtime.start_agent(KEY, model=model)
    assert post_raw(url, run_input(), token=None).status_code == 401
    assert post_raw(url, run_input(), token=OTHER).status_code == 403
    assert model.call_count == 0


def test_an_agent_that_is_not_running_is_a_404_naming_it(url: str) -> None:
    response = post_raw(url, run_input())
    assert response.status_code == 404
    assert "s1/helper/0" in response.json()["error"]["message"]


def test_a_busy_agent_is_a_409_that_leaves_the_session_state_as_it_was(
    runtime: Runtime, url: str
) -> None:
    agent = runtime.start_agent(KEY, model=HangingModel())
    state = runtime.memory.kv(KEY[0])
    state.put("mode", "math")
    agent.prompt("keep busy")
    response = post_raw(url, run_input(state={"mode": "poetry", "extra": 1}))
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "agent_busy"
    assert state.items() == {"mode": "math"}  # the refused request changed nothing
    agent.abort()


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ("{oops", "not an AG-UI RunAgentInput"),
        (json.dumps({"runId": "r", "messages": []}), "threadId"),
        (run_input(messages=[]), "is empty"),
        (
            run_input(messages=[AguiAssistantMessage(id="a", content="hi")]),
            "ends with a assistant message",
        ),
        (run_input(state=[1, 2]), "must be a JSON object"),
        (
            json.dumps(
                {
                    "threadId": "t",
                    "runId": "r",
                    "messages": [
                        {
                            "id": "u",
                            "role": "user",
                            "content": [
                                {"type": "image", "source": {"type": "url", "value": "http://x"}}
                            ],
                        }
                    ],
                }
            ),
            "only text parts",
        ),
    ],
)
def test_a_bad_run_input_is_a_422_naming_the_problem(
    runtime: Runtime, url: str, body: str, named: str
) -> None:
    model = ScriptedModel(["never"])
    runtime.start_agent(KEY, model=model)
    response = post_raw(url, body)
    assert response.status_code == 422, response.text
    assert named in response.json()["error"]["message"]
    assert model.call_count == 0


def test_a_state_json_cannot_hold_is_a_422_that_writes_nothing(runtime: Runtime, url: str) -> None:
    runtime.start_agent(KEY, model=ScriptedModel(["never"]))
    state = runtime.memory.kv(KEY[0])
    body = run_input(state={"ok_key": 1}).replace('"ok_key":1', '"ok_key":1,"bad":NaN')
    assert "NaN" in body
    response = post_raw(url, body)
    assert response.status_code == 422, response.text
    assert "RunAgentInput.state['bad'] is not JSON" in response.json()["error"]["message"]
    assert state.items() == {}  # the key before it was not written either


# --- the mapping, without HTTP ----------------------------------------------------------------


def test_retries_and_gaps_are_custom_events_and_a_timeout_is_a_run_error() -> None:
    run = AguiRun(KEY, "t", "r")
    retry = run.feed(ProviderRetry(agent=KEY, attempt=1, delay=0.5, error="overloaded"))
    assert [(e.type, e.name) for e in retry] == [(EventType.CUSTOM, "agent_runtime.provider_retry")]
    dropped = run.feed(EventsDropped(agent=KEY, count=3))
    assert dropped[0].value == 3
    (ended,) = run.feed(Canceled(agent=KEY, reason="timeout"))
    assert (ended.type, ended.code) == (EventType.RUN_ERROR, "canceled")
    assert "timeout" in ended.message
    (failed,) = run.feed(Error(agent=KEY, reason="boom"))
    assert failed.type == EventType.RUN_ERROR
    for event in [*retry, *dropped, ended, failed]:
        parse(EventEncoder().encode(event).removeprefix("data: ").strip())


def test_a_delegates_events_are_not_the_runs() -> None:
    run = AguiRun(KEY, "t", "r")
    delegate = AgentKey("s1", "researcher", 0)
    assert run.feed(TurnStart(agent=delegate)) == []
    assert run.feed(CustomEvent(agent=delegate, name="x")) == []
    assert run.feed(TurnStart(agent=KEY))[0].type == EventType.STEP_STARTED


def test_it_runs_on_a_runtime_that_shares_the_servers_loop() -> None:
    config = RuntimeConfig(memory=MemoryConfig(store="memory"))
    with served_sharing_loop(config, routes) as (root, runtime):
        runtime.start_agent(KEY, model=tool_turn_model(), tools=[add])
        events = post_run(root, run_input())
    assert events[-1].type == EventType.RUN_FINISHED
    assert events[-1].result == "the sum is 5"
    assert of_type(events, EventType.TOOL_CALL_RESULT)[0].content == "5"


def test_a_run_error_shows_no_upstream_url_or_credential() -> None:
    reason = (
        "network_error: ConnectError at http://10.0.0.5:8000/v1 (Bearer sk-abcdefghijklmnop1234)"
    )
    (failed,) = AguiRun(KEY, "t", "r").feed(Error(agent=KEY, reason=reason))
    assert failed.message.startswith("network_error: ConnectError at <url>")
    assert "10.0.0.5" not in failed.message and "sk-abc" not in failed.message


@tool
def mark(n: int, *, ctx: ToolContext) -> str:
    """Write `n` as the session state's `turn`."""
    ctx.session_state.put("turn", n)
    return "marked"


TURNS = 20


def test_each_state_snapshot_is_the_state_as_of_its_turn_and_follows_every_changing_turn(
    runtime: Runtime, url: str
) -> None:
    # A model far faster than the client: each turn's tool writes the state at once.
    turns = [
        ScriptedTurn(tool_calls=[ToolCall(id=f"c{n}", name="mark", arguments={"n": n})])
        for n in range(1, TURNS + 1)
    ]
    runtime.start_agent(KEY, model=ScriptedModel([*turns, "done"]), tools=[mark])
    events = post_run(url, run_input("mark the turns"))
    seen: list[tuple[str, Any]] = []
    for event in events:
        if event.type == EventType.STEP_FINISHED:
            seen.append(("finished", event.step_name))
        elif event.type == EventType.STATE_SNAPSHOT:
            seen.append(("snapshot", event.snapshot))
    expected: list[tuple[str, Any]] = [("snapshot", {})]
    for n in range(1, TURNS + 1):
        expected += [("finished", f"turn {n}"), ("snapshot", {"turn": n})]
    expected.append(("finished", f"turn {TURNS + 1}"))  # the answer: no change, no snapshot
    assert seen == expected
