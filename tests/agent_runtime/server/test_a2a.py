"""The A2A endpoints over real HTTP on 127.0.0.1, driven by a2a-sdk's own client: the agent
card at its well-known path, tasks that run our agents (blocking and streaming), failure,
cancel, context = session, and the refusals (401/403/404)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a", reason="needs a2a-sdk: pip install -e '.[server]'")
pytest.importorskip("uvicorn", reason="needs the server extra: pip install -e '.[server]'")

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.client import Client
from a2a.helpers import get_artifact_text, get_message_text
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    InvalidParamsError,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskNotFoundError,
    TaskState,
)

from agent_runtime import AgentKey, Runtime, tool
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.llm import (
    AuthenticationError,
    BaseChatModel,
    ChatRequest,
    ModelInfo,
    StreamChunk,
    TextDelta,
)
from agent_runtime.llm.types import FinishDelta
from agent_runtime.loop import RetryPolicy
from agent_runtime.messages import ToolCall
from agent_runtime.server._a2a import routes
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from tests.agent_runtime.server._protocol_app import (
    ADMIN,
    OTHER,
    PRINCIPALS,
    app_of,
    served,
    served_sharing_loop,
)

KEY = AgentKey("s1", "helper", 0)


@pytest.fixture
def runtime(make_runtime: Callable[..., Runtime]) -> Runtime:
    return make_runtime(memory=MemoryConfig(store="memory"))


@pytest.fixture
def url(runtime: Runtime) -> Iterator[str]:
    with served(app_of(routes(runtime), PRINCIPALS)) as root:
        yield root


def base_of(root: str, key: AgentKey = KEY) -> str:
    return f"{root}/v1/a2a/{key.session}/{key.role}/{key.index}"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def tool_turn_model() -> ScriptedModel:
    call = ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})
    return ScriptedModel(
        [ScriptedTurn(tool_calls=[call]), ScriptedTurn(chunks=["the sum ", "is 5"])]
    )


def user_message(text: str, **fields: Any) -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, parts=[Part(text=text)], message_id="m-1", **fields)
    return SendMessageRequest(message=message)


async def with_client(root: str, use: Any, *, streaming: bool, token: str = ADMIN) -> Any:
    headers = {"authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        config = ClientConfig(httpx_client=http, streaming=streaming)
        client = await ClientFactory(config).create_from_url(base_of(root))
        return await use(client)


async def responses(client: Client, request: SendMessageRequest) -> list[StreamResponse]:
    return [response async for response in client.send_message(request)]


async def say_hi(client: Client) -> list[StreamResponse]:
    return await responses(client, user_message("hi"))


def last_task(got: list[StreamResponse]) -> Task:
    tasks = [r.task for r in got if r.HasField("task")]
    assert tasks, got
    return tasks[-1]


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout=60))


def test_the_agent_card_is_at_the_well_known_path_of_the_agents_base_url(
    runtime: Runtime, url: str
) -> None:
    runtime.start_agent(KEY, model=ScriptedModel([]), tools=[add])

    async def resolve() -> Any:
        headers = {"authorization": f"Bearer {ADMIN}"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            return await A2ACardResolver(http, base_of(url)).get_agent_card()

    card = run(resolve())
    assert card.name == "s1/helper/0"
    assert [s.id for s in card.skills] == ["prompt", "add"]
    assert card.skills[1].description == "Add two numbers."
    assert card.capabilities.streaming
    (interface,) = card.supported_interfaces
    assert (interface.url, interface.protocol_binding) == (base_of(url), "JSONRPC")
    assert "bearer" in card.security_schemes


def test_another_agent_runs_a_task_that_is_one_run_of_ours(runtime: Runtime, url: str) -> None:
    model = tool_turn_model()
    runtime.start_agent(KEY, model=model, tools=[add])

    async def use(client: Client) -> tuple[Task, Task]:
        task = last_task(await responses(client, user_message("add 2 and 3")))
        fetched = await client.get_task(GetTaskRequest(id=task.id))
        return task, fetched

    task, fetched = run(with_client(url, use, streaming=False))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.context_id == "s1"  # the agent's session
    assert [get_artifact_text(a) for a in task.artifacts] == ["the sum is 5"]
    assert get_message_text(task.status.message) == "the sum is 5"
    assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
    assert fetched.id == task.id
    assert model.call_count == 2  # the tool turn ran here, on our agent
    assert model.requests[0].messages[-1].text == "add 2 and 3"


def test_a_streaming_client_sees_the_task_work_then_complete(runtime: Runtime, url: str) -> None:
    runtime.start_agent(KEY, model=tool_turn_model(), tools=[add])
    got = run(with_client(url, lambda c: responses(c, user_message("add")), streaming=True))
    states = [r.status_update.status.state for r in got if r.HasField("status_update")]
    assert TaskState.TASK_STATE_WORKING in states
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    updates = [r.artifact_update for r in got if r.HasField("artifact_update")]
    # The deltas as they came (appended), then the final answer whole, as the last chunk.
    assert [(get_artifact_text(u.artifact), u.append, u.last_chunk) for u in updates] == [
        ("the sum ", False, False),
        ("is 5", True, False),
        ("the sum is 5", False, True),
    ]
    assert len({u.artifact.artifact_id for u in updates}) == 1


class GatedModel(BaseChatModel):
    """Streams `first`, waits until `gate` is set, then streams `second`."""

    def __init__(self, first: str, second: str) -> None:
        self.first, self.second = first, second
        self.gate = threading.Event()

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(provider="test", model="gated")

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        yield TextDelta(text=self.first)
        while not self.gate.is_set():
            await asyncio.sleep(0.01)
        yield TextDelta(text=self.second)
        yield FinishDelta(reason="stop")


def test_a_streaming_client_gets_the_answer_while_it_is_generated(
    runtime: Runtime, url: str
) -> None:
    model = GatedModel("the first half, ", "then the rest")
    runtime.start_agent(KEY, model=model)

    async def use(client: Client) -> tuple[list[StreamResponse], list[StreamResponse]]:
        before: list[StreamResponse] = []
        stream = client.send_message(user_message("talk"))
        async for response in stream:
            before.append(response)
            if response.HasField("artifact_update"):
                break  # the model has not finished: its first half reached the client
        model.gate.set()
        after = [response async for response in stream]
        return before, after

    before, after = run(with_client(url, use, streaming=True))
    first = before[-1].artifact_update
    assert (get_artifact_text(first.artifact), first.append) == ("the first half, ", False)
    updates = [r.artifact_update for r in after if r.HasField("artifact_update")]
    assert [(get_artifact_text(u.artifact), u.append) for u in updates] == [
        ("then the rest", True),
        ("the first half, then the rest", False),
    ]
    assert updates[-1].last_chunk
    assert last_status(after) == TaskState.TASK_STATE_COMPLETED


def test_a_later_task_continues_the_agents_session(runtime: Runtime, url: str) -> None:
    model = ScriptedModel(["first answer", "second answer"])
    runtime.start_agent(KEY, model=model)

    async def use(client: Client) -> None:
        await responses(client, user_message("one"))
        await responses(client, user_message("two", context_id="s1"))

    run(with_client(url, use, streaming=False))
    assert [m.text for m in model.requests[1].messages] == ["one", "first answer", "two"]


def test_a_failed_run_fails_the_task_with_its_reason(runtime: Runtime, url: str) -> None:
    model = ScriptedModel([ScriptedTurn(error=AuthenticationError("bad key"))])
    runtime.start_agent(KEY, model=model, retry=RetryPolicy(max_retries=0))
    task = last_task(
        run(with_client(url, lambda c: responses(c, user_message("hi")), streaming=False))
    )
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert "bad key" in get_message_text(task.status.message)


class HangingModel(BaseChatModel):
    """Streams one chunk, then hangs until cancelled (and records that)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.cancelled = threading.Event()

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(provider="test", model="hanging")

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        try:
            self.started.set()
            yield TextDelta(text="thinking")
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        yield TextDelta(text="never")  # pragma: no cover


def test_cancelling_the_task_aborts_the_run(runtime: Runtime, url: str) -> None:
    model = HangingModel()
    agent = runtime.start_agent(KEY, model=model)

    async def use(client: Client) -> Task:
        stream = client.send_message(user_message("think forever"))
        first = await anext(stream)
        task_id = first.task.id if first.HasField("task") else first.status_update.task_id
        while not model.started.is_set():
            await asyncio.sleep(0.01)
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        await stream.aclose()
        return canceled

    canceled = run(with_client(url, use, streaming=True))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    wait_until(model.cancelled.is_set, timeout=10, what="the model call was cancelled")
    wait_until(lambda: not agent.state().is_running, timeout=10, what="the run ended")


def test_a_message_for_another_context_is_refused_naming_it(runtime: Runtime, url: str) -> None:
    model = ScriptedModel(["never"])
    runtime.start_agent(KEY, model=model)
    request = user_message("hi", context_id="elsewhere")
    with pytest.raises(
        InvalidParamsError, match="contextId 'elsewhere' is not this agent's context"
    ):
        run(with_client(url, lambda c: responses(c, request), streaming=False))
    assert model.call_count == 0


def test_a_task_of_one_agent_is_not_found_through_another(runtime: Runtime, url: str) -> None:
    runtime.start_agent(KEY, model=ScriptedModel(["done"]))
    runtime.start_agent(AgentKey("s1", "other", 0), model=ScriptedModel([]))
    task = last_task(
        run(with_client(url, lambda c: responses(c, user_message("hi")), streaming=False))
    )

    async def fetch_elsewhere() -> Any:
        headers = {"authorization": f"Bearer {ADMIN}"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            config = ClientConfig(httpx_client=http, streaming=False)
            other = await ClientFactory(config).create_from_url(
                base_of(url, AgentKey("s1", "other", 0))
            )
            return await other.get_task(GetTaskRequest(id=task.id))

    with pytest.raises(TaskNotFoundError):
        run(fetch_elsewhere())


def test_without_a_principal_401_for_another_session_403_and_no_agent_404(
    runtime: Runtime, url: str
) -> None:
    runtime.start_agent(KEY, model=ScriptedModel([]))
    card = base_of(url) + "/.well-known/agent-card.json"
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    assert httpx.get(card, timeout=30).status_code == 401
    assert httpx.post(base_of(url), json=rpc, timeout=30).status_code == 401
    other = {"authorization": f"Bearer {OTHER}"}
    assert httpx.get(card, headers=other, timeout=30).status_code == 403
    assert httpx.post(base_of(url), json=rpc, headers=other, timeout=30).status_code == 403
    admin = {"authorization": f"Bearer {ADMIN}"}
    missing = base_of(url, AgentKey("s1", "nobody", 0))
    response = httpx.get(missing + "/.well-known/agent-card.json", headers=admin, timeout=30)
    assert response.status_code == 404
    assert "s1/nobody/0" in response.json()["error"]["message"]
    assert httpx.post(missing, json=rpc, headers=admin, timeout=30).status_code == 404


def test_a_task_runs_on_a_runtime_that_shares_the_servers_loop() -> None:
    config = RuntimeConfig(memory=MemoryConfig(store="memory"))
    with served_sharing_loop(config, routes) as (root, runtime):
        runtime.start_agent(KEY, model=tool_turn_model(), tools=[add])
        got = run(with_client(root, lambda c: responses(c, user_message("add")), streaming=True))
    assert last_status(got) == TaskState.TASK_STATE_COMPLETED


def last_status(got: list[StreamResponse]) -> Any:
    return [r.status_update.status.state for r in got if r.HasField("status_update")][-1]


def test_a_task_for_a_busy_agent_is_rejected(runtime: Runtime, url: str) -> None:
    agent = runtime.start_agent(KEY, model=HangingModel())
    agent.prompt("keep busy")
    task = last_task(run(with_client(url, say_hi, streaming=False)))
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert "running another task" in get_message_text(task.status.message)
    agent.abort()
