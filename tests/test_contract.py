"""The public contract of DESIGN.md (sections 3-8 and 11), checked from the outside as written.

Every test imports names from the paths DESIGN.md gives and calls them the way code outside the
project does: positional and keyword parameters as written, documented defaults, documented
attributes and behaviours. Internals are not touched. A test marked `xfail(strict=True)` records
a deviation of the code from DESIGN.md: it keeps the suite green while the deviation stays
visible, and turns red as soon as the code is fixed (then drop the marker).

Readings of ambiguous wording are stated in the test that depends on them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pykka
import pytest
from pydantic import BaseModel

import agent_runtime
import agent_runtime.events as events_module
import agent_runtime.llm as llm
import agent_runtime.loop as loop
import agent_runtime.messages as messages_module
from agent_runtime import (
    AgentKey,
    RetryPolicy,
    Runtime,
    Tool,
    ToolContext,
    ToolResult,
    tool,
)
from agent_runtime.event_stream import (
    EventStream,
    RunCanceled,
    RunFailed,
    StreamClosed,
    StreamOverflow,
)
from agent_runtime.events import (
    AgentEnd,
    AgentStart,
    Canceled,
    Error,
    EventsDropped,
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
from agent_runtime.llm import ChatModel, ChatRequest, ChatResponse, ChatResponseBuilder
from agent_runtime.loop import AgentContext, LoopConfig
from agent_runtime.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from agent_runtime.testing import MockProviderServer, ScriptedModel, ScriptedTurn, wait_until
from supervisors import (
    AsyncTaskSupervisor,
    ChildSpec,
    DynamicSupervisor,
    MaxChildrenReached,
    SupervisedActor,
    Supervisor,
    TaskSupervisor,
    kill,
)

P = inspect.Parameter
EMPTY = P.empty
PLAIN = (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)
SLOW = 30.0  # a scripted delay no test waits out: runs that use it are aborted


# -- helpers ------------------------------------------------------------------------------------


def parameters(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    """The parameters of `fn` as a caller sees them (without self / cls)."""
    return [p for p in inspect.signature(fn).parameters.values() if p.name not in ("self", "cls")]


def check_signature(
    fn: Callable[..., Any],
    *positional: tuple[str, Any],
    keyword: tuple[tuple[str, Any], ...] = (),
) -> None:
    """Assert that `fn` can be called as DESIGN.md writes it.

    `positional`: the leading parameters, in order, as (name, default) pairs (`EMPTY` for a
    required one), each passable by position and by name. `keyword`: parameters written after
    `*`, by name with their defaults. Any further parameter must be optional, so that calls
    written as in DESIGN.md keep working.
    """
    params = parameters(fn)
    lead = params[: len(positional)]
    assert [(p.name, p.default) for p in lead] == list(positional)
    assert all(p.kind in PLAIN for p in lead), [(p.name, p.kind) for p in lead]
    by_name = {p.name: p for p in params}
    for name, default in keyword:
        assert name in by_name, f"no parameter {name!r}"
        assert by_name[name].kind in (P.KEYWORD_ONLY, P.POSITIONAL_OR_KEYWORD)
        assert by_name[name].default == default
    documented = {name for name, _ in positional} | {name for name, _ in keyword}
    for p in params:
        if p.name not in documented and p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD):
            assert p.default is not EMPTY, f"undocumented required parameter {p.name!r}"


def field_names(model: type[BaseModel]) -> list[str]:
    return list(model.model_fields)


def assert_fields_in_order(model: type[BaseModel], *documented: str) -> None:
    """The documented fields exist and appear in the documented order (others may interleave)."""
    names = field_names(model)
    missing = [n for n in documented if n not in names]
    assert not missing, f"{model.__name__} lacks {missing}"
    assert sorted(documented, key=names.index) == list(documented)


def field_default(model: type[BaseModel], name: str) -> Any:
    return model.model_fields[name].get_default(call_default_factory=True)


def literal_values(model: type[BaseModel], name: str) -> set[Any]:
    """The values a `Literal[...]` (or `Literal[...] | None`) field admits."""
    annotation = model.model_fields[name].annotation
    if get_origin(annotation) is Literal:
        return set(get_args(annotation))
    values: set[Any] = set()
    for arg in get_args(annotation):
        if get_origin(arg) is Literal:
            values |= set(get_args(arg))
    return values


def call(call_id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def slow_turn() -> ScriptedTurn:
    """A turn that streams one chunk, then waits (until the run is aborted)."""
    return ScriptedTurn(chunks=["a", "b"], chunk_delay=SLOW)


def results_of(new_messages: list[Any]) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in new_messages if isinstance(m, ToolResultMessage)}


def collect(events: Any) -> list[Any]:
    """Run an async iterator of events to its end on a fresh event loop."""

    async def drain() -> list[Any]:
        return [event async for event in events]

    return asyncio.run(drain())


NO_RETRY = RetryPolicy(max_retries=0)
FAST_RETRY = RetryPolicy(max_retries=3, base_delay=0.001, max_delay=0.005)


class Stopper:
    """Remembers supervisors a test started and stops every one at teardown."""

    def __init__(self) -> None:
        self._stops: list[Callable[[], object]] = []

    def add(self, handle: Any) -> Any:
        self._stops.append(lambda: handle.stop(timeout=5.0))
        return handle

    def close(self) -> None:
        for stop in reversed(self._stops):
            with contextlib.suppress(Exception):
                stop()


@pytest.fixture
def stopper() -> Iterator[Stopper]:
    s = Stopper()
    yield s
    s.close()


class Probe(SupervisedActor):
    """A child that logs its starts and stops and crashes on request."""

    def __init__(self, name: str, log: list[tuple[str, str]]) -> None:
        super().__init__()
        self.name = name
        self.log = log

    def on_start(self) -> None:
        self.log.append(("start", self.name))

    def on_stop(self) -> None:
        self.log.append(("stop", self.name))

    def on_receive(self, message: Any) -> Any:
        if message == "crash":
            raise RuntimeError(f"{self.name} crashed")
        return "pong"


def probe_spec(name: str, log: list[tuple[str, str]], **options: Any) -> ChildSpec:
    return ChildSpec(id=name, start=lambda: Probe.start(name, log), **options)


def ref_of(sup: Any, child_id: str) -> Any:
    for info in sup.which_children():
        if info.id == child_id:
            return info.ref
    raise KeyError(child_id)


def ids_of(sup: Any) -> list[str]:
    return [info.id for info in sup.which_children()]


def replaced(sup: Any, child_id: str, old: Any) -> Callable[[], bool]:
    def check() -> bool:
        ref = ref_of(sup, child_id)
        return ref is not None and ref is not old and ref.is_alive()

    return check


# == 3. supervisors =============================================================================


def test_supervised_actor_is_a_pykka_threading_actor() -> None:
    assert issubclass(SupervisedActor, pykka.ThreadingActor)


def test_child_spec_fields_and_defaults() -> None:
    assert field_names(ChildSpec)[:5] == ["id", "start", "restart", "shutdown", "type"]
    spec = ChildSpec(id="a", start=lambda: None)
    assert (spec.restart, spec.shutdown, spec.type) == ("permanent", 5.0, "worker")


@pytest.mark.parametrize("restart", ["permanent", "transient", "temporary"])
def test_child_spec_accepts_every_restart_type(restart: str) -> None:
    assert ChildSpec(id="a", start=lambda: None, restart=restart).restart == restart


@pytest.mark.parametrize("shutdown", [0.5, "brutal_kill", "infinity"])
def test_child_spec_accepts_every_shutdown_form(shutdown: Any) -> None:
    assert ChildSpec(id="a", start=lambda: None, shutdown=shutdown).shutdown == shutdown


def test_child_spec_accepts_both_child_types() -> None:
    assert ChildSpec(id="a", start=lambda: None, type="supervisor").type == "supervisor"


def test_child_spec_takes_id_and_start_positionally() -> None:
    start = lambda: None  # noqa: E731
    spec = ChildSpec("a", start)  # type: ignore[misc]
    assert spec.id == "a"


def test_supervisor_start_signature() -> None:
    check_signature(
        Supervisor.start,
        ("children", EMPTY),
        ("strategy", "one_for_one"),
        ("max_restarts", 3),
        ("max_seconds", 5.0),
        ("name", None),
    )


def test_supervisor_handle_method_signatures() -> None:
    check_signature(Supervisor.start_child, ("spec", EMPTY))
    # DESIGN writes terminate_child(id) / restart_child(id) / delete_child(id): `id` is read as
    # a placeholder for one positional argument (it would shadow the builtin), not as a name.
    for method in ("terminate_child", "restart_child", "delete_child"):
        (param,) = parameters(getattr(Supervisor, method))
        assert param.kind in PLAIN and param.default is EMPTY
    check_signature(Supervisor.stop, ("timeout", None))
    check_signature(Supervisor.which_children)
    check_signature(Supervisor.count_children)


def test_children_start_in_list_order_and_stop_in_reverse(stopper: Stopper) -> None:
    log: list[tuple[str, str]] = []
    sup = Supervisor.start([probe_spec(n, log) for n in ("a", "b", "c")])
    assert log == [("start", "a"), ("start", "b"), ("start", "c")]
    sup.stop()
    assert log[3:] == [("stop", "c"), ("stop", "b"), ("stop", "a")]
    assert not sup.alive


def test_which_children_reports_child_info_in_order(stopper: Stopper) -> None:
    log: list[tuple[str, str]] = []
    sup = stopper.add(
        Supervisor.start([probe_spec("a", log), probe_spec("b", log, restart="transient")])
    )
    infos = sup.which_children()
    assert [i.id for i in infos] == ["a", "b"]
    a, b = infos
    assert isinstance(a.ref, pykka.ActorRef) and a.ref.is_alive()
    assert (a.restart, a.type, a.alive) == ("permanent", "worker", True)
    assert b.restart == "transient"


def test_child_info_and_child_counts_fields(stopper: Stopper) -> None:
    log: list[tuple[str, str]] = []
    sup = stopper.add(Supervisor.start([probe_spec("a", log)]))
    (info,) = sup.which_children()
    assert_fields_in_order(type(info), "id", "ref", "restart", "type", "alive")
    assert_fields_in_order(type(sup.count_children()), "specs", "active", "supervisors", "workers")


def test_count_children_reports_specs_active_supervisors_workers(stopper: Stopper) -> None:
    log: list[tuple[str, str]] = []
    inner = stopper.add(Supervisor.start([probe_spec("w", log)]))
    sup = stopper.add(
        Supervisor.start(
            [
                probe_spec("a", log),
                ChildSpec(id="inner", start=lambda: inner.ref, type="supervisor"),
            ]
        )
    )
    counts = sup.count_children()
    assert (counts.specs, counts.active, counts.supervisors, counts.workers) == (2, 2, 1, 1)


def test_handle_exposes_ref_and_alive(stopper: Stopper) -> None:
    sup = stopper.add(Supervisor.start([]))
    assert isinstance(sup.ref, pykka.ActorRef)
    assert sup.alive is True
    sup.stop(timeout=5.0)
    assert sup.alive is False


def test_permanent_child_restarts_after_a_normal_stop(stopper: Stopper) -> None:
    log: list[tuple[str, str]] = []
    sup = stopper.add(Supervisor.start([probe_spec("a", log)]))
    old = ref_of(sup, "a")
    old.stop()
    wait_until(replaced(sup, "a", old), timeout=3)


def test_transient_child_restarts_after_a_crash(stopper: Stopper) -> None:
    log: list[tuple[str, str]] = []
    sup = stopper.add(Supervisor.start([probe_spec("a", log, restart="transient")]))
    old = ref_of(sup, "a")
    old.tell("crash")  # an exception escaping a tell handler is an abnormal exit
    wait_until(replaced(sup, "a", old), timeout=3)


def test_transient_child_is_not_restarted_after_a_normal_stop(stopper: Stopper) -> None:
    log: list[tuple[str, str]] = []
    sup = stopper.add(Supervisor.start([probe_spec("a", log, restart="transient")]))
    ref_of(sup, "a").stop()
    wait_until(lambda: ref_of(sup, "a") is None, timeout=3)
    assert log.count(("start", "a")) == 1


def test_killed_transient_child_is_restarted(stopper: Stopper) -> None:
    log: list[tuple[str, str]] = []
    sup = stopper.add(Supervisor.start([probe_spec("a", log, restart="transient")]))
    old = ref_of(sup, "a")
    kill(old)
    wait_until(replaced(sup, "a", old), timeout=3)


def test_temporary_child_is_never_restarted(stopper: Stopper) -> None:
    log: list[tuple[str, str]] = []
    sup = stopper.add(Supervisor.start([probe_spec("a", log, restart="temporary")]))
    kill(ref_of(sup, "a"))
    wait_until(lambda: "a" not in ids_of(sup) or ref_of(sup, "a") is None, timeout=3)
    assert log.count(("start", "a")) == 1


def test_a_crash_never_takes_a_sibling_down_under_one_for_one(stopper: Stopper) -> None:
    log: list[tuple[str, str]] = []
    sup = stopper.add(Supervisor.start([probe_spec("a", log), probe_spec("b", log)]))
    a, b = ref_of(sup, "a"), ref_of(sup, "b")
    a.tell("crash")
    wait_until(replaced(sup, "a", a), timeout=3)
    assert ref_of(sup, "b") is b and b.is_alive()
    assert ("stop", "b") not in log


def test_one_for_all_restarts_every_child(stopper: Stopper) -> None:
    log: list[tuple[str, str]] = []
    specs = [probe_spec(n, log) for n in ("a", "b", "c")]
    sup = stopper.add(Supervisor.start(specs, strategy="one_for_all"))
    a, b, c = (ref_of(sup, n) for n in ("a", "b", "c"))
    b.tell("crash")
    wait_until(replaced(sup, "b", b), timeout=3)
    assert ref_of(sup, "a") is not a and ref_of(sup, "c") is not c


def test_rest_for_one_restarts_the_child_and_those_started_after_it(stopper: Stopper) -> None:
    log: list[tuple[str, str]] = []
    specs = [probe_spec(n, log) for n in ("a", "b", "c")]
    sup = stopper.add(Supervisor.start(specs, strategy="rest_for_one"))
    a, b, c = (ref_of(sup, n) for n in ("a", "b", "c"))
    b.tell("crash")
    wait_until(replaced(sup, "b", b), timeout=3)
    assert ref_of(sup, "a") is a and ref_of(sup, "c") is not c


class Stubborn(SupervisedActor):
    """A child whose on_stop blocks until released."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__()
        self.release = release

    def on_stop(self) -> None:
        self.release.wait(5)


@pytest.mark.timing
def test_a_child_gets_its_shutdown_time_to_stop(stopper: Stopper) -> None:
    release = threading.Event()
    spec = ChildSpec(id="slow", start=lambda: Stubborn.start(release), shutdown=0.02)
    sup = Supervisor.start([spec])
    child = ref_of(sup, "slow")
    began = time.monotonic()
    try:
        sup.stop()
        took = time.monotonic() - began
    finally:
        release.set()
    assert 0.015 <= took < 2.0
    assert not child.is_alive()


def test_restart_intensity_exceeded_exits_abnormally_and_the_parent_restarts_it(
    stopper: Stopper,
) -> None:
    log: list[tuple[str, str]] = []
    inners: list[Supervisor] = []

    def start_inner() -> Any:
        inner = Supervisor.start([probe_spec("w", log)], max_restarts=1, max_seconds=5.0)
        inners.append(inner)
        return inner.ref

    outer = stopper.add(
        Supervisor.start([ChildSpec(id="inner", start=start_inner, type="supervisor")])
    )
    first = inners[0]
    w = ref_of(first, "w")
    kill(w)  # restart 1 of 1: allowed
    wait_until(replaced(first, "w", w), timeout=3)
    assert first.alive
    kill(ref_of(first, "w"))  # restart 2 within max_seconds: more than max_restarts
    wait_until(lambda: len(inners) == 2, timeout=3)
    assert not first.alive
    assert ref_of(outer, "inner") is inners[1].ref


def test_start_terminate_restart_delete_child(stopper: Stopper) -> None:
    log: list[tuple[str, str]] = []
    sup = stopper.add(Supervisor.start([probe_spec("a", log)]))
    ref = sup.start_child(probe_spec("b", log))
    assert isinstance(ref, pykka.ActorRef) and ref.is_alive()
    assert ids_of(sup) == ["a", "b"]
    sup.terminate_child("b")
    assert not ref.is_alive() and ref_of(sup, "b") is None
    again = sup.restart_child("b")
    assert ref_of(sup, "b") is not None and ref_of(sup, "b").is_alive()
    del again
    sup.terminate_child("b")
    sup.delete_child("b")
    assert ids_of(sup) == ["a"]


def test_dynamic_supervisor_start_signature() -> None:
    check_signature(
        DynamicSupervisor.start,
        ("max_children", None),
        ("max_restarts", 3),
        ("max_seconds", 5.0),
    )


def test_dynamic_start_child_returns_a_ref_and_respects_max_children(stopper: Stopper) -> None:
    log: list[tuple[str, str]] = []
    dyn = stopper.add(DynamicSupervisor.start(max_children=1))
    ref = dyn.start_child(probe_spec("a", log))
    assert isinstance(ref, pykka.ActorRef) and ref.is_alive()
    with pytest.raises(MaxChildrenReached):
        dyn.start_child(probe_spec("b", log))


def test_dynamic_terminate_child_takes_a_ref_and_returns_bool(stopper: Stopper) -> None:
    log: list[tuple[str, str]] = []
    dyn = stopper.add(DynamicSupervisor.start())
    ref = dyn.start_child(probe_spec("a", log))
    assert dyn.terminate_child(ref) is True
    assert not ref.is_alive()
    assert dyn.terminate_child(ref) is False


def test_dynamic_which_and_count_children(stopper: Stopper) -> None:
    log: list[tuple[str, str]] = []
    dyn = stopper.add(DynamicSupervisor.start())
    ref = dyn.start_child(probe_spec("a", log, restart="temporary"))
    (info,) = dyn.which_children()
    assert (info.id, info.ref, info.restart, info.type, info.alive) == (
        "a",
        ref,
        "temporary",
        "worker",
        True,
    )
    counts = dyn.count_children()
    assert (counts.specs, counts.active, counts.supervisors, counts.workers) == (1, 1, 0, 1)
    dyn.stop()
    assert not ref.is_alive()


def test_dynamic_permanent_child_restarts_after_a_kill(stopper: Stopper) -> None:
    log: list[tuple[str, str]] = []
    dyn = stopper.add(DynamicSupervisor.start())
    ref = dyn.start_child(probe_spec("a", log))
    kill(ref)

    def restarted() -> bool:
        infos = dyn.which_children()
        return len(infos) == 1 and infos[0].ref is not ref and infos[0].alive

    wait_until(restarted, timeout=3)


def test_task_supervisor_start_signature() -> None:
    check_signature(TaskSupervisor.start, ("max_workers", None), ("name", None))
    check_signature(TaskSupervisor.stop, ("timeout", None))
    fn, args, kwargs = parameters(TaskSupervisor.submit)  # submit(fn, *args, **kwargs)
    assert fn.kind in PLAIN and fn.default is EMPTY
    assert (args.kind, kwargs.kind) == (P.VAR_POSITIONAL, P.VAR_KEYWORD)


def test_task_submit_returns_a_future_and_isolates_a_crash(stopper: Stopper) -> None:
    tasks = stopper.add(TaskSupervisor.start(max_workers=2))

    def boom() -> None:
        raise ValueError("task failed")

    failed = tasks.submit(boom)
    ok = tasks.submit(lambda a, *, b: a + b, 1, b=2)
    assert isinstance(failed, concurrent.futures.Future)
    assert isinstance(failed.exception(timeout=3), ValueError)
    assert ok.result(timeout=3) == 3
    assert tasks.submit(pow, 2, 5).result(timeout=3) == 32
    wait_until(lambda: tasks.active() == 0, timeout=3)
    assert isinstance(tasks.active(), int)
    tasks.stop(timeout=None)


def test_async_task_supervisor_start_signature() -> None:
    check_signature(AsyncTaskSupervisor.start, ("name", None))
    check_signature(AsyncTaskSupervisor.submit, ("coro", EMPTY))
    check_signature(AsyncTaskSupervisor.stop, ("timeout", None))


def test_async_submit_runs_the_coroutine_on_the_supervisors_loop(stopper: Stopper) -> None:
    aio = stopper.add(AsyncTaskSupervisor.start())
    assert isinstance(aio.loop, asyncio.AbstractEventLoop)

    async def which_loop() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    future = aio.submit(which_loop())
    assert isinstance(future, concurrent.futures.Future)
    assert future.result(timeout=3) is aio.loop
    wait_until(lambda: aio.active() == 0, timeout=3)
    aio.stop(timeout=None)


def test_cancelling_the_future_cancels_the_task(stopper: Stopper) -> None:
    aio = stopper.add(AsyncTaskSupervisor.start())
    started, cancelled = threading.Event(), threading.Event()

    async def sleeper() -> None:
        started.set()
        try:
            await asyncio.sleep(SLOW)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    future = aio.submit(sleeper())
    assert started.wait(3)
    assert aio.active() == 1
    future.cancel()
    assert cancelled.wait(3)


def test_kill_signature_and_effect(stopper: Stopper) -> None:
    check_signature(kill, ("ref", EMPTY), ("reason", "killed"))
    log: list[tuple[str, str]] = []
    ref = Probe.start("x", log)
    kill(ref, reason="test")
    assert not ref.is_alive()


# == 4. Runtime, registry, abort table ==========================================================


def test_runtime_start_and_stop_signatures() -> None:
    check_signature(Runtime.start, ("config", None))
    check_signature(Runtime.stop, ("timeout", 10.0))
    check_signature(Runtime.start_agent, ("key", EMPTY))
    assert any(p.kind is P.VAR_KEYWORD for p in parameters(Runtime.start_agent))


def test_runtime_as_context_manager_stops_on_exit() -> None:
    with Runtime.start() as rt:
        sup = rt.supervisor
        assert sup.alive
    assert not sup.alive


def test_runtime_start_accepts_a_config_path_and_a_config_object() -> None:
    path = Path(__file__).resolve().parents[1] / "config" / "runtime.toml"
    for config in (str(path), path, agent_runtime.RuntimeConfig()):
        rt = Runtime.start(config)
        try:
            assert rt.supervisor.alive
        finally:
            rt.stop()


def test_root_children_in_design_order(runtime: Runtime) -> None:
    assert ids_of(runtime.supervisor) == [
        "abort_table",
        "registry",
        "loop_tasks",
        "tool_tasks",
        "subagents",
    ]


def test_agent_key_is_a_named_tuple_of_session_role_index() -> None:
    assert issubclass(AgentKey, tuple)
    assert AgentKey._fields == ("session", "role", "index")
    key = AgentKey("s", "r", 0)
    assert (key.session, key.role, key.index) == ("s", "r", 0)
    assert key == ("s", "r", 0)


def test_a_plain_tuple_key_is_accepted(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel())
    assert isinstance(agent.key, AgentKey) and agent.key == ("s", "r", 0)
    assert runtime.registry.lookup(("s", "r", 0)) is agent
    assert runtime.registry.lookup(AgentKey("s", "r", 0)) is agent


def test_start_agent_is_subagents_start(runtime: Runtime) -> None:
    check_signature(type(runtime.subagents).start, ("key", EMPTY))
    a = runtime.start_agent(("s", "r", 0), model=ScriptedModel())
    b = runtime.subagents.start(("s", "r", 1), model=ScriptedModel())
    assert runtime.subagents.list() == [a, b]
    assert runtime.subagents.count() == 2


def test_second_registration_raises_already_registered_with_holder(runtime: Runtime) -> None:
    first = runtime.start_agent(("s", "r", 0), model=ScriptedModel())
    with pytest.raises(agent_runtime.AlreadyRegistered) as raised:
        runtime.subagents.start(("s", "r", 0), model=ScriptedModel())
    assert raised.value.holder in (first, first.ref)


def test_under_a_race_exactly_one_registration_wins(runtime: Runtime) -> None:
    barrier = threading.Barrier(6)
    outcomes: list[str] = []

    def start() -> None:
        barrier.wait(timeout=3)
        try:
            runtime.start_agent(("race", "r", 0), model=ScriptedModel())
            outcomes.append("won")
        except agent_runtime.AlreadyRegistered:
            outcomes.append("lost")

    threads = [threading.Thread(target=start) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=5)
    assert sorted(outcomes) == ["lost"] * 5 + ["won"]


def test_subagents_stop_list_count_stop_all(runtime: Runtime) -> None:
    a = runtime.start_agent(("s", "r", 0), model=ScriptedModel())
    runtime.start_agent(("s", "r", 1), model=ScriptedModel())
    runtime.start_agent(("t", "r", 0), model=ScriptedModel())
    assert runtime.subagents.stop(a) is True
    assert runtime.subagents.stop(a) is False
    assert runtime.subagents.stop(("s", "r", 1)) is True
    assert runtime.subagents.count() == 1
    assert runtime.subagents.stop_all() == 1
    assert runtime.subagents.list() == [] and runtime.subagents.count() == 0


def test_registry_lookups_and_listings(runtime: Runtime) -> None:
    a = runtime.start_agent(("s1", "research", 0), model=ScriptedModel())
    b = runtime.start_agent(("s1", "write", 0), model=ScriptedModel())
    c = runtime.start_agent(("s2", "research", 0), model=ScriptedModel())
    reg = runtime.registry
    assert reg.lookup(("s1", "research", 0)) is a
    assert reg.lookup(("nobody", "x", 0)) is None
    found = reg.lookup_with_metadata(("s1", "write", 0))
    assert found is not None and found[0] is b and isinstance(found[1], dict)
    assert reg.lookup_with_metadata(("nobody", "x", 0)) is None
    listing = reg.list()
    expected = {
        AgentKey("s1", "research", 0): a,
        AgentKey("s1", "write", 0): b,
        AgentKey("s2", "research", 0): c,
    }
    assert dict(listing) == expected and len(listing) == 3
    assert all(isinstance(k, AgentKey) for k, _ in listing)
    assert sorted(reg.list_by_session("s1"), key=lambda t: t[0]) == [
        ("research", 0, a),
        ("write", 0, b),
    ]
    assert sorted(reg.list_by_role("research"), key=lambda t: t[0]) == [
        ("s1", 0, a),
        ("s2", 0, c),
    ]
    assert reg.count() == 3
    assert reg.count_by_session("s1") == 2
    assert reg.next_index("s1", "research") == 1
    assert reg.next_index("s9", "research") == 0


def test_registry_entry_disappears_when_the_actor_is_killed(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel())
    kill(agent.ref)
    wait_until(lambda: runtime.registry.lookup(("s", "r", 0)) is None, timeout=3)


def test_registry_entry_disappears_when_the_agent_stops(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel())
    agent.stop()
    wait_until(lambda: runtime.registry.lookup(("s", "r", 0)) is None, timeout=3)
    assert runtime.registry.count() == 0


def test_subagents_are_temporary_by_default(runtime: Runtime) -> None:
    crashed = runtime.start_agent(("s", "r", 0), model=ScriptedModel())
    sibling = runtime.start_agent(("s", "r", 1), model=ScriptedModel())
    kill(crashed.ref)
    wait_until(lambda: runtime.registry.lookup(("s", "r", 0)) is None, timeout=3)
    assert sibling.alive and runtime.subagents.count() == 1
    assert not crashed.alive


def test_transient_agent_restarts_under_the_same_key_with_its_history(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel(["hi"]), restart="transient")
    agent.run("hello", timeout=3)
    old_ref = agent.ref
    kill(old_ref)

    def restarted() -> bool:
        found = runtime.registry.lookup(("s", "r", 0))
        return found is not None and found.alive and found.ref is not old_ref

    wait_until(restarted, timeout=3)
    again = runtime.registry.lookup(("s", "r", 0))
    assert [m.role for m in again.state().messages] == ["user", "assistant"]


def test_design_modules_host_their_names() -> None:
    from agent_runtime import abort, agent, event_stream, registry, tools

    assert registry.AgentRegistry is agent_runtime.AgentRegistry and registry.AgentKey is AgentKey
    assert abort.AbortSignal is agent_runtime.AbortSignal
    assert abort.AbortTable is agent_runtime.AbortTable
    assert event_stream.Subscription is agent_runtime.Subscription
    assert (tools.Tool, tools.tool, tools.ToolResult, tools.ToolContext) == (
        Tool,
        tool,
        ToolResult,
        ToolContext,
    )
    assert agent.Agent is agent_runtime.Agent and hasattr(agent, "AgentActor")


def test_abort_table_and_signal(runtime: Runtime) -> None:
    signal = runtime.abort_table.new()
    assert isinstance(signal, agent_runtime.AbortSignal)
    check_signature(type(signal).abort, ("reason", None))
    assert [p.name for p in parameters(type(signal).wait)][:1] == ["timeout"]
    assert signal.aborted is False and signal.wait(0.01) is False
    signal.abort("why")
    assert signal.aborted is True and signal.reason == "why"
    assert signal.wait(0.01) is True
    signal.clear()
    assert signal.aborted is False


def test_stop_aborts_runs_and_stops_the_tree() -> None:
    rt = Runtime.start()
    agent = rt.start_agent(("s", "r", 0), model=ScriptedModel([slow_turn()]))
    agent.prompt("go")
    rt.stop(timeout=5.0)
    assert not rt.supervisor.alive
    assert not agent.alive


# == 5. messages, tools, events =================================================================


def test_message_models_have_the_design_fields() -> None:
    assert {"content"} <= set(field_names(UserMessage))
    assert {"content", "stop_reason", "error_message", "usage", "model", "provider"} <= set(
        field_names(AssistantMessage)
    )
    assert {"tool_call_id", "tool_name", "content", "details", "is_error", "trust"} <= set(
        field_names(ToolResultMessage)
    )
    assert {"id", "name", "arguments"} <= set(field_names(ToolCall))
    assert "text" in field_names(TextContent)
    assert literal_values(AssistantMessage, "stop_reason") == {
        "stop",
        "length",
        "tool_use",
        "error",
        "aborted",
    }
    assert literal_values(ToolResultMessage, "trust") == {"trusted", "untrusted"}
    for name in ("ImageContent", "ThinkingContent", "Usage", "Content", "Message"):
        assert hasattr(messages_module, name)


def test_message_fields_are_in_the_documented_order() -> None:
    assert_fields_in_order(
        AssistantMessage, "content", "stop_reason", "error_message", "usage", "model", "provider"
    )
    assert_fields_in_order(
        ToolResultMessage, "tool_call_id", "tool_name", "content", "details", "is_error", "trust"
    )
    assert_fields_in_order(ToolCall, "id", "name", "arguments")


def test_user_message_takes_a_string_or_content_blocks() -> None:
    assert UserMessage(content="hi").content == "hi"
    blocks = [TextContent(text="a"), ImageContent(data="AAAA", mime_type="image/png")]
    assert UserMessage(content=blocks).content == blocks


MESSAGES: list[BaseModel] = [
    UserMessage(content="hi"),
    UserMessage(content=[TextContent(text="a"), ImageContent(data="AAAA", mime_type="image/png")]),
    AssistantMessage(
        content=[
            ThinkingContent(thinking="hm"),
            TextContent(text="ok"),
            call("c1", "read", path="x"),
        ],
        stop_reason="tool_use",
        usage=Usage(input_tokens=3, output_tokens=2, cached_input_tokens=1),
        model="m",
        provider="p",
    ),
    AssistantMessage(content=[], stop_reason="error", error_message="boom"),
    ToolResultMessage(
        tool_call_id="c1",
        tool_name="read",
        content=[TextContent(text="data")],
        details={"k": [1, 2]},
        is_error=True,
        trust="untrusted",
    ),
    ToolCall(id="c", name="n", arguments={"a": 1}),
    TextContent(text="t"),
    ThinkingContent(thinking="t"),
    ImageContent(data="AAAA", mime_type="image/png"),
    Usage(input_tokens=1, output_tokens=2, cached_input_tokens=0),
]


@pytest.mark.parametrize("model", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_model_round_trips_through_json(model: BaseModel) -> None:
    assert type(model).model_validate_json(model.model_dump_json()) == model


def test_tool_decorator_is_usable_bare_and_with_options() -> None:
    @tool
    def bare(x: int) -> str:
        """Bare tool."""
        return str(x)

    @tool(parallel_safe=True, timeout=30.0)
    def read_file(path: str, max_bytes: int = 10_000, *, ctx: ToolContext) -> str:
        """Read a file."""
        return path

    assert isinstance(bare, Tool) and isinstance(read_file, Tool)
    assert read_file.name == "read_file"


def test_tool_schema_from_signature_and_description_from_docstring(runtime: Runtime) -> None:
    @tool(parallel_safe=True, timeout=30.0)
    def read_file(path: str, max_bytes: int = 10_000, *, ctx: ToolContext) -> str:
        """Read a file."""
        return path

    model = ScriptedModel(["ok"])
    agent = runtime.start_agent(("s", "r", 0), model=model, tools=[read_file])
    agent.run("go", timeout=3)
    (spec,) = model.requests[0].tools
    assert spec.name == "read_file"
    assert spec.description == "Read a file."
    props = spec.parameters["properties"]
    assert set(props) == {"path", "max_bytes"}  # the ToolContext is injected, not shown
    assert props["path"]["type"] == "string"
    assert props["max_bytes"]["type"] == "integer"
    assert props["max_bytes"].get("default") == 10_000
    assert spec.parameters.get("required") == ["path"]


class Answer(BaseModel):
    value: int


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def as_text() -> str:
    """Return a string."""
    return "plain"


@tool
def as_result() -> ToolResult:
    """Return a ToolResult."""
    return ToolResult(content=[TextContent(text="structured")], details={"k": 1})


@tool
def as_model() -> Answer:
    """Return a pydantic model."""
    return Answer(value=7)


@tool
def as_json() -> dict[str, Any]:
    """Return a JSON-able value."""
    return {"n": [1, 2]}


@tool
def explode() -> str:
    """Raise."""
    raise RuntimeError("tool exploded")


@tool(timeout=0.02)
async def too_slow() -> str:
    """Sleep past the tool timeout."""
    await asyncio.sleep(SLOW)
    return "never"


TOOLS = [add, as_text, as_result, as_model, as_json, explode, too_slow]


def run_tool_calls(runtime: Runtime, *calls: ToolCall) -> dict[str, ToolResultMessage]:
    model = ScriptedModel([ScriptedTurn(tool_calls=list(calls)), "done"])
    agent = runtime.start_agent(("tools", "r", 0), model=model, tools=TOOLS, retry=NO_RETRY)
    result = agent.run("go", timeout=3)
    assert result.stop_reason == "stop" and result.text == "done"  # never a crash of the run
    return results_of(result.new_messages)


def test_tool_arguments_are_coerced_laxly(runtime: Runtime) -> None:
    (result,) = run_tool_calls(runtime, call("c", "add", a="40", b=2)).values()
    assert not result.is_error and result.text == "42"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("as_text", "plain"),
        ("as_result", "structured"),
        ("as_model", "7"),
        ("as_json", "1"),
    ],
)
def test_tool_return_values_become_results(runtime: Runtime, name: str, expected: str) -> None:
    (result,) = run_tool_calls(runtime, call("c", name)).values()
    assert not result.is_error and expected in result.text


@pytest.mark.parametrize(
    "bad",
    [
        call("c", "add", a="not a number", b=1),
        call("c", "no_such_tool"),
        call("c", "explode"),
        call("c", "too_slow"),
    ],
    ids=["invalid-arguments", "unknown-tool", "exception", "timeout"],
)
def test_tool_failures_become_error_results(runtime: Runtime, bad: ToolCall) -> None:
    (result,) = run_tool_calls(runtime, bad).values()
    assert result.is_error and result.tool_call_id == "c" and result.text


def test_tool_context_carries_identity_signal_runtime_and_update(runtime: Runtime) -> None:
    seen: dict[str, Any] = {}

    @tool
    def probe(ctx: ToolContext) -> str:
        """Look at the context."""
        seen.update(
            tool_call_id=ctx.tool_call_id,
            agent_key=ctx.agent_key,
            signal=ctx.signal,
            runtime=ctx.runtime,
        )
        ctx.update("half way")
        return "done"

    model = ScriptedModel([ScriptedTurn(tool_calls=[call("c9", "probe")]), "ok"])
    agent = runtime.start_agent(("s", "r", 0), model=model, tools=[probe])
    events = list(agent.stream("go"))
    assert seen["tool_call_id"] == "c9"
    assert seen["agent_key"] == ("s", "r", 0)
    assert isinstance(seen["signal"], agent_runtime.AbortSignal)
    assert seen["runtime"] is runtime
    (update,) = [e for e in events if isinstance(e, ToolExecutionUpdate)]
    assert update.tool_call_id == "c9" and "half way" in str(update.partial)


EVENT_FIELDS: dict[type[BaseModel], set[str]] = {
    AgentStart: set(),
    TurnStart: set(),
    MessageStart: {"message"},
    MessageUpdate: {"message", "delta"},
    MessageEnd: {"message"},
    ToolExecutionStart: {"tool_call_id", "name", "args"},
    ToolExecutionUpdate: {"tool_call_id", "name", "args", "partial"},
    ToolExecutionEnd: {"tool_call_id", "name", "result", "is_error"},
    TurnEnd: {"message", "tool_results"},
    ProviderRetry: {"attempt", "delay", "error"},
    ProviderRetryEnd: {"attempt", "outcome"},
    EventsDropped: {"count"},
    AgentEnd: {"new_messages"},
    Error: {"reason", "partial"},
    Canceled: {"reason"},
}


@pytest.mark.parametrize("cls", list(EVENT_FIELDS), ids=lambda c: c.__name__)
def test_event_classes_carry_identity_their_fields_and_a_type(cls: type[BaseModel]) -> None:
    names = set(field_names(cls))
    assert {"agent", "run_id", "seq", "ts", "type"} <= names
    assert EVENT_FIELDS[cls] <= names
    assert isinstance(field_default(cls, "type"), str)


def test_event_type_tags_are_distinct() -> None:
    tags = [field_default(cls, "type") for cls in EVENT_FIELDS]
    assert len(set(tags)) == len(tags)


def test_events_are_importable_from_agent_runtime_events() -> None:
    for cls in EVENT_FIELDS:
        assert getattr(events_module, cls.__name__) is cls


def test_a_runs_events_carry_agent_run_id_and_gap_free_seq(runtime: Runtime) -> None:
    model = ScriptedModel([ScriptedTurn(tool_calls=[call("c", "as_text")]), "bye"])
    agent = runtime.start_agent(("s", "r", 0), model=model, tools=TOOLS)
    events = list(agent.stream("go"))
    assert isinstance(events[0], AgentStart)
    assert isinstance(events[-1], AgentEnd)
    assert sum(isinstance(e, AgentEnd | Error | Canceled) for e in events) == 1
    assert {e.agent for e in events} == {AgentKey("s", "r", 0)}
    assert len({e.run_id for e in events}) == 1 and events[0].run_id
    seqs = [e.seq for e in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert all(isinstance(e.ts, float) for e in events)


def test_agent_end_new_messages_hold_only_that_runs_messages(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel(["one", "two"]))
    agent.run("first", timeout=3)
    events = list(agent.stream("second"))
    end = events[-1]
    assert isinstance(end, AgentEnd)
    assert [(m.role, getattr(m, "text", None)) for m in end.new_messages] == [
        ("user", "second"),
        ("assistant", "two"),
    ]


# == 6. EventStream =============================================================================


def ev(seq: int = 0) -> TurnStart:
    return TurnStart(seq=seq)


def test_event_stream_signatures() -> None:
    check_signature(EventStream, ("max_queue", 10_000), ("overflow", "error"), ("timeout", None))
    check_signature(EventStream.push, ("event", EMPTY), ("timeout", None))
    check_signature(EventStream.push_async, ("event", EMPTY))
    assert parameters(EventStream.complete)[0].name == "new_messages"
    check_signature(EventStream.error, ("reason", EMPTY), ("partial", None))
    check_signature(EventStream.cancel, ("reason", "canceled"))
    check_signature(EventStream.result, ("timeout", None))
    check_signature(EventStream.stats)


@pytest.mark.parametrize("overflow", ["error", "drop_oldest", "drop_newest", "block"])
def test_event_stream_accepts_the_four_overflow_policies(overflow: str) -> None:
    assert EventStream(overflow=overflow).stats().max_queue == 10_000  # type: ignore[arg-type]


def test_event_stream_rejects_an_unknown_overflow_policy() -> None:
    with pytest.raises(ValueError, match="drop-old"):
        EventStream(overflow="drop-old")  # type: ignore[arg-type]


def test_run_errors_are_importable_from_event_stream_and_top_level() -> None:
    assert RunFailed is agent_runtime.RunFailed
    assert RunCanceled is agent_runtime.RunCanceled
    assert StreamOverflow is agent_runtime.StreamOverflow
    assert StreamClosed is agent_runtime.StreamClosed


def test_iteration_yields_events_then_the_single_terminal() -> None:
    s = EventStream()
    for i in range(3):
        s.push(ev(i))
    s.complete([UserMessage(content="x")])
    items = list(s)
    assert [type(e) for e in items] == [TurnStart, TurnStart, TurnStart, AgentEnd]
    assert [e.seq for e in items[:3]] == [0, 1, 2]


def test_result_returns_the_new_messages() -> None:
    s = EventStream()
    msgs = [UserMessage(content="x")]
    s.complete(msgs)
    assert s.result(timeout=1) == msgs


def test_result_raises_run_failed_with_reason_and_partial() -> None:
    s = EventStream()
    partial = AssistantMessage(content=[TextContent(text="par")])
    s.error("boom", partial)
    with pytest.raises(RunFailed) as raised:
        s.result(timeout=1)
    assert raised.value.reason == "boom" and raised.value.partial == partial


def test_result_raises_run_canceled_with_reason() -> None:
    s = EventStream()
    s.cancel()
    with pytest.raises(RunCanceled) as raised:
        s.result(timeout=1)
    assert raised.value.reason == "canceled"


def test_result_raises_timeout_error() -> None:
    with pytest.raises(TimeoutError):
        EventStream().result(timeout=0.01)


def test_error_overflow_raises_stream_overflow() -> None:
    s = EventStream(max_queue=1)
    s.push(ev(0))
    with pytest.raises(StreamOverflow):
        s.push(ev(1))


@pytest.mark.timing
def test_block_overflow_raises_after_the_push_timeout() -> None:
    s = EventStream(max_queue=1, overflow="block")
    s.push(ev(0))
    began = time.monotonic()
    with pytest.raises(StreamOverflow):
        s.push(ev(1), timeout=0.02)
    assert time.monotonic() - began >= 0.015


def test_push_async_never_raises_on_overflow_and_counts_it() -> None:
    s = EventStream(max_queue=1)
    s.push_async(ev(0))
    s.push_async(ev(1))
    stats = s.stats()
    assert (stats.queue_size, stats.max_queue, stats.dropped) == (1, 1, 1)


def test_push_async_never_raises_after_the_end() -> None:
    s = EventStream()
    s.cancel()
    s.push_async(ev(0))


def test_the_first_terminal_wins() -> None:
    s = EventStream()
    s.cancel("first")
    s.complete([])
    s.error("third")
    items = list(s)
    assert len(items) == 1 and isinstance(items[0], Canceled) and items[0].reason == "first"


def test_pushes_after_a_terminal_raise_stream_closed() -> None:
    s = EventStream()
    s.complete([])
    with pytest.raises(StreamClosed):
        s.push(ev(0))


@pytest.mark.parametrize("overflow", ["error", "drop_oldest", "drop_newest", "block"])
def test_a_terminal_is_never_lost_to_overflow(overflow: Any) -> None:
    s = EventStream(max_queue=1, overflow=overflow)
    s.push(ev(0))
    s.push_async(ev(1))  # the queue is full
    s.complete([])
    items = list(s)
    assert isinstance(items[-1], AgentEnd)


def test_cancel_keeps_accepted_events_for_a_late_reader() -> None:
    s = EventStream()
    for i in range(3):
        s.push(ev(i))
    s.cancel("stop")
    items = list(s)
    assert [e.seq for e in items[:3]] == [0, 1, 2]
    assert isinstance(items[3], Canceled) and items[3].reason == "stop"
    assert len(items) == 4


def test_drop_oldest_delivers_a_marker_before_the_next_event() -> None:
    s = EventStream(max_queue=2, overflow="drop_oldest")
    for i in range(5):
        s.push(ev(i))
    s.complete([])
    items = list(s)
    kinds = [type(e).__name__ for e in items]
    assert kinds == ["EventsDropped", "TurnStart", "TurnStart", "AgentEnd"]
    assert items[0].count == 3 and [items[1].seq, items[2].seq] == [3, 4]


def test_stats_fields_order() -> None:
    assert_fields_in_order(type(EventStream().stats()), "queue_size", "max_queue", "dropped")


def test_push_async_never_raises_even_for_a_terminal_event() -> None:
    s = EventStream()
    s.push_async(AgentEnd(new_messages=[]))


def test_stats_fields() -> None:
    s = EventStream(max_queue=7)
    s.push(ev(0))
    stats = s.stats()
    assert (stats.queue_size, stats.max_queue, stats.dropped) == (1, 7, 0)


def test_async_for_yields_events_then_the_terminal() -> None:
    s = EventStream()
    s.push(ev(0))
    s.complete([])
    assert [type(e) for e in collect(s)] == [TurnStart, AgentEnd]


def test_timeout_cancels_the_stream_with_reason_timeout() -> None:
    s = EventStream(timeout=0.02)
    with pytest.raises(RunCanceled) as raised:
        s.result(timeout=3)
    assert raised.value.reason == "timeout"


def test_several_readers_share_one_queue() -> None:
    s = EventStream()
    for i in range(40):
        s.push(ev(i))
    s.complete([])
    seen: list[list[Any]] = [[], []]

    def read(into: list[Any]) -> None:
        into.extend(iter(s))

    threads = [threading.Thread(target=read, args=(seen[i],)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=3)
    plain = [e.seq for part in seen for e in part if isinstance(e, TurnStart)]
    assert sorted(plain) == list(range(40))  # each event went to exactly one reader
    assert all(isinstance(part[-1], AgentEnd) for part in seen if part)


# == 7. Agent ===================================================================================


def test_agent_handle_method_signatures() -> None:
    Agent = agent_runtime.Agent
    check_signature(Agent.prompt, ("input", EMPTY))
    check_signature(Agent.continue_run)
    check_signature(Agent.steer, ("message", EMPTY), keyword=(("system_prompt", None),))
    check_signature(Agent.follow_up, ("message", EMPTY), keyword=(("system_prompt", None),))
    check_signature(Agent.abort, ("reason", "user_abort"))
    check_signature(Agent.wait_for_idle, ("timeout", None))
    check_signature(Agent.run, ("input", EMPTY), ("timeout", None))
    check_signature(Agent.stream, ("input", EMPTY))
    check_signature(
        Agent.subscribe, ("max_queue", 1000), ("overflow", "block"), ("block_timeout", 30.0)
    )
    check_signature(Agent.state)
    check_signature(Agent.reset)
    # DESIGN writes set_system_prompt(p), set_model(m), set_tools(t): read as placeholders for
    # one positional argument, not as parameter names.
    for name in ("set_system_prompt", "set_model", "set_tools"):
        (param,) = [p for p in parameters(getattr(Agent, name)) if p.default is EMPTY]
        assert param.kind in PLAIN
    check_signature(Agent.stop)


def test_start_agent_accepts_every_documented_option(runtime: Runtime) -> None:
    @tool
    def noop() -> str:
        """Do nothing."""
        return ""

    agent = runtime.start_agent(
        ("s1", "research", 0),
        model=ScriptedModel(["hi"]),
        system_prompt="be brief",
        tools=[noop],
        steering_mode="all",
        follow_up_mode="all",
        max_tool_concurrency=8,
        max_tool_turns=25,
        tool_timeout=None,
        retry=RetryPolicy(),
        restart="temporary",
        thinking_level="off",
        tool_registry=None,
    )
    assert agent.run("hi", timeout=3).text == "hi"
    assert agent.state().system_prompt == "be brief"


@pytest.mark.parametrize("level", ["off", "minimal", "low", "medium", "high", "xhigh"])
def test_every_thinking_level_is_accepted(runtime: Runtime, level: str) -> None:
    runtime.start_agent(("s", level, 0), model=ScriptedModel(), thinking_level=level)


def test_agent_key_alive_and_ref(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel())
    assert agent.key == AgentKey("s", "r", 0) and isinstance(agent.key, AgentKey)
    assert agent.alive is True
    assert isinstance(agent.ref, pykka.ActorRef) and agent.ref.is_alive()
    agent.stop()
    assert agent.alive is False


def test_prompt_returns_a_run_id_and_a_busy_agent_raises_agent_busy(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel([slow_turn()]))
    run_id = agent.prompt("go")
    assert isinstance(run_id, str) and run_id
    with pytest.raises(agent_runtime.AgentBusy):
        agent.prompt("again")
    with pytest.raises(agent_runtime.AgentBusy):
        agent.continue_run()
    agent.abort()
    agent.wait_for_idle(timeout=3)


def test_prompt_accepts_a_message_and_a_list_of_messages(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel(["a", "b"]))
    assert agent.run(UserMessage(content="one"), timeout=3).text == "a"
    assert agent.run([UserMessage(content="two")], timeout=3).text == "b"


def test_continue_run_without_messages_raises_cannot_continue(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel())
    with pytest.raises(agent_runtime.CannotContinue):
        agent.continue_run()


def test_continue_run_after_an_assistant_message_raises_cannot_continue(
    runtime: Runtime,
) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel(["hi"]))
    agent.run("x", timeout=3)
    with pytest.raises(agent_runtime.CannotContinue):
        agent.continue_run()


def test_run_returns_a_run_result(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel(["hello"]))
    result = agent.run("hi", timeout=3)
    assert isinstance(result, agent_runtime.RunResult)
    assert result.text == "hello" and result.stop_reason == "stop"
    assert isinstance(result.usage, Usage)
    assert [m.role for m in result.new_messages] == ["user", "assistant"]


def test_run_of_a_failed_run_raises_run_failed(runtime: Runtime) -> None:
    turn = ScriptedTurn(error=llm.AuthenticationError("bad key"))
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel([turn]), retry=NO_RETRY)
    with pytest.raises(RunFailed) as raised:
        agent.run("hi", timeout=3)
    assert raised.value.reason


def test_run_timeout_raises_timeout_error(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel([slow_turn()]))
    with pytest.raises(TimeoutError):
        agent.run("hi", timeout=0.02)
    agent.abort()


def test_wait_for_idle_raises_timeout_error(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel([slow_turn()]))
    agent.prompt("go")
    with pytest.raises(TimeoutError):
        agent.wait_for_idle(timeout=0.02)
    agent.abort()
    agent.wait_for_idle(timeout=3)


def test_abort_cancels_the_run_with_reason_user_abort(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel([slow_turn()]))
    with agent.subscribe() as sub:
        agent.prompt("go")
        wait_until(lambda: agent.state().stream_message is not None, timeout=3)
        agent.abort()
        events = list(sub.until_end(timeout=3))
    assert isinstance(events[-1], Canceled) and events[-1].reason == "user_abort"


def test_run_of_an_aborted_run_raises_run_canceled(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel([slow_turn()]))
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            agent.run("go", timeout=5)
        except BaseException as exc:
            outcome.append(exc)

    t = threading.Thread(target=run)
    t.start()
    wait_until(lambda: agent.state().is_running, timeout=3)
    agent.abort("enough")
    t.join(timeout=3)
    assert isinstance(outcome[0], RunCanceled) and outcome[0].reason == "enough"


@pytest.mark.timing
def test_state_answers_promptly_while_a_run_is_busy(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel([slow_turn()]))
    agent.prompt("go")
    wait_until(lambda: agent.state().stream_message is not None, timeout=3)
    began = time.monotonic()
    state = agent.state()
    agent.steer("steer me")
    assert time.monotonic() - began < 0.5
    assert state.is_running is True
    assert state.stream_message is not None
    agent.abort()
    agent.wait_for_idle(timeout=3)


@pytest.mark.timing
def test_the_agent_answers_promptly_while_blocked_on_a_slow_subscriber(runtime: Runtime) -> None:
    model = ScriptedModel([ScriptedTurn(chunks=list("abcdefgh"))])
    agent = runtime.start_agent(("s", "r", 0), model=model)
    with agent.subscribe(max_queue=1, overflow="block", block_timeout=10.0):  # never read
        agent.prompt("go")
        began = time.monotonic()
        assert agent.state().is_running
        agent.steer("hello")
        agent.abort()
        assert time.monotonic() - began < 1.0
    agent.wait_for_idle(timeout=3)  # closing the subscription releases the run


def test_queued_steering_and_follow_ups_survive_an_abort(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel([slow_turn()]))
    agent.prompt("go")
    wait_until(lambda: agent.state().stream_message is not None, timeout=3)
    agent.follow_up("later")
    agent.abort()
    agent.wait_for_idle(timeout=3)
    assert [m.text for m in agent.state().follow_up_queue] == ["later"]


def test_a_follow_up_sent_just_as_a_run_ends_is_not_stranded(runtime: Runtime) -> None:
    # It starts no run of its own: it waits, queued, for the run the next prompt starts.
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel(["first", "second", "third"]))
    agent.run("go", timeout=3)
    agent.follow_up("one more")
    agent.wait_for_idle(timeout=3)
    assert [m.text for m in agent.state().follow_up_queue] == ["one more"]  # type: ignore[union-attr]
    result = agent.run("next", timeout=3)
    assert [m.text for m in result.new_messages] == ["next", "second", "one more", "third"]  # type: ignore[union-attr]


def test_abort_reaches_the_retry_backoff(runtime: Runtime) -> None:
    failing = ScriptedTurn(error=llm.ProviderError("down"))
    slow_retry = RetryPolicy(max_retries=3, base_delay=SLOW, max_delay=SLOW)
    agent = runtime.start_agent(
        ("s", "r", 0), model=ScriptedModel([failing, "never"]), retry=slow_retry
    )
    with agent.subscribe() as sub:
        agent.prompt("go")
        for event in sub.until_end(timeout=3):
            if isinstance(event, ProviderRetry):
                agent.abort()
            last = event
    assert isinstance(last, Canceled)


def test_state_has_the_design_fields(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel(), system_prompt="sp")
    state = agent.state()
    for name in (
        "system_prompt",
        "model",
        "tools",
        "messages",
        "is_running",
        "stream_message",
        "pending_tool_calls",
        "error",
        "steering_queue",
        "follow_up_queue",
    ):
        assert hasattr(state, name), name
    assert state.system_prompt == "sp" and state.is_running is False
    assert state.messages == [] and state.steering_queue == [] and state.follow_up_queue == []


def test_steer_and_follow_up_queue_messages_with_their_system_prompts(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel(), system_prompt="own")
    agent.steer("s1", system_prompt="new prompt")
    agent.follow_up("f1", system_prompt="newer prompt")
    state = agent.state()
    assert [m.text for m in state.steering_queue] == ["s1"]
    assert [m.text for m in state.follow_up_queue] == ["f1"]
    # A prompt sent with a message travels with it; queueing it changes nothing else.
    assert state.system_prompt == "own"


def test_stream_yields_the_runs_events_up_to_its_terminal(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel(["hi"]))
    events = list(agent.stream("go"))
    assert isinstance(events[0], AgentStart) and isinstance(events[-1], AgentEnd)
    assert not agent.state().is_running


def test_subscription_is_iterable_context_manager_and_closable(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel(["a"]))
    sub = agent.subscribe()
    assert isinstance(sub, agent_runtime.Subscription)
    check_signature(type(sub).until_end, ("timeout", None))
    with sub:
        agent.prompt("go")
        events = list(sub.until_end(timeout=3))
    assert isinstance(events[-1], AgentEnd)
    assert list(sub) == []  # closed: iteration ends after the buffered events
    sub.close()  # idempotent


def test_subscription_until_end_times_out(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel())
    with agent.subscribe() as sub, pytest.raises(TimeoutError):
        list(sub.until_end(timeout=0.02))


def test_subscription_is_async_iterable(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel(["a"]))
    sub = agent.subscribe()
    agent.prompt("go")

    async def read() -> list[Any]:
        out = []
        async for event in sub:
            out.append(event)
            if isinstance(event, AgentEnd):
                break
        return out

    events = asyncio.run(asyncio.wait_for(read(), 3))
    sub.close()
    assert isinstance(events[0], AgentStart) and isinstance(events[-1], AgentEnd)


def test_reset_and_setters(runtime: Runtime) -> None:
    first = ScriptedModel(["one"])
    second = ScriptedModel(["two"])

    @tool
    def noop() -> str:
        """Do nothing."""
        return ""

    agent = runtime.start_agent(("s", "r", 0), model=first)
    agent.run("x", timeout=3)
    agent.reset()
    assert agent.state().messages == []
    agent.set_system_prompt("sys")
    agent.set_model(second)
    agent.set_tools([noop])
    assert agent.run("y", timeout=3).text == "two"
    request = second.requests[0]
    assert request.system == "sys"
    assert [t.name for t in request.tools] == ["noop"]
    assert [m.role for m in request.messages] == ["user"]


def test_stop_ends_the_agent_and_calls_raise_agent_stopped(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "r", 0), model=ScriptedModel())
    agent.stop()
    assert not agent.alive
    with pytest.raises(agent_runtime.AgentStopped):
        agent.prompt("x")


# -- loop types ---------------------------------------------------------------------------------


def test_agent_context_fields() -> None:
    assert field_names(AgentContext)[:3] == ["system_prompt", "messages", "tools"]
    ctx = AgentContext(system_prompt="s", messages=[UserMessage(content="x")], tools=[add])
    assert ctx.system_prompt == "s" and list(ctx.tools) == [add]


def test_agent_context_takes_its_fields_positionally() -> None:
    ctx = AgentContext("s", [], [])  # type: ignore[misc]
    assert ctx.system_prompt == "s"


LOOP_CONFIG_DEFAULTS = [
    ("max_tool_concurrency", 8),
    ("max_tool_turns", 25),
    ("tool_timeout", None),
    ("retry", RetryPolicy()),
    ("abort_grace", 0.25),
    ("get_steering_messages", None),
    ("get_follow_up_messages", None),
    ("convert_to_llm", None),
    ("transform_context", None),
]


def test_loop_config_fields_order_and_defaults() -> None:
    names = field_names(LoopConfig)
    assert names[: 1 + len(LOOP_CONFIG_DEFAULTS)] == ["model"] + [
        n for n, _ in LOOP_CONFIG_DEFAULTS
    ]
    assert LoopConfig.model_fields["model"].is_required()
    config = LoopConfig(model=ScriptedModel())
    for name, default in LOOP_CONFIG_DEFAULTS:
        assert getattr(config, name) == default, name


def test_loop_config_takes_the_model_positionally() -> None:
    model = ScriptedModel()
    assert LoopConfig(model).model is model  # type: ignore[misc]


def test_retry_policy_defaults_and_import_paths() -> None:
    assert RetryPolicy is loop.RetryPolicy
    assert field_names(RetryPolicy)[:4] == [
        "max_retries",
        "base_delay",
        "max_delay",
        "max_retry_after",
    ]
    policy = RetryPolicy()
    assert (policy.max_retries, policy.base_delay, policy.max_delay, policy.max_retry_after) == (
        3,
        2.0,
        30.0,
        120.0,
    )
    custom = RetryPolicy(max_retries=1, base_delay=0.5, max_delay=1.0, max_retry_after=2.0)
    assert custom.max_retry_after == 2.0


def test_loop_functions_signatures() -> None:
    check_signature(
        loop.run,
        ("prompts", EMPTY),
        ("context", EMPTY),
        ("config", EMPTY),
        ("signal", None),
    )
    check_signature(loop.continue_run, ("context", EMPTY), ("config", EMPTY), ("signal", None))
    assert callable(loop.stream) and callable(loop.stream_continue)


def test_loop_run_is_an_async_generator_of_events() -> None:
    model = ScriptedModel(["hi"])
    context = AgentContext(system_prompt="", messages=[], tools=[])
    gen = loop.run([UserMessage(content="x")], context, LoopConfig(model=model))
    assert inspect.isasyncgen(gen)
    events = collect(gen)
    assert isinstance(events[-1], AgentEnd)
    assert [m.role for m in events[-1].new_messages] == ["user", "assistant"]
    assert context.messages == []  # no hidden state: the caller's context is not mutated


def test_loop_stream_returns_a_bounded_event_stream(runtime: Runtime) -> None:
    context = AgentContext(system_prompt="", messages=[], tools=[])
    config = LoopConfig(model=ScriptedModel(["hi"]))
    s = loop.stream([UserMessage(content="x")], context, config, runtime=runtime)
    assert isinstance(s, EventStream)
    assert [m.role for m in s.result(timeout=3)] == ["user", "assistant"]


@pytest.mark.parametrize(
    "messages",
    [[], [UserMessage(content="x"), AssistantMessage(content=[TextContent(text="y")])]],
    ids=["empty", "assistant-last"],
)
def test_continue_from_an_uncontinuable_context_raises_value_error(
    runtime: Runtime, messages: list[Any]
) -> None:
    context = AgentContext(system_prompt="", messages=messages, tools=[])
    config = LoopConfig(model=ScriptedModel(["hi"]))
    with pytest.raises(ValueError):
        collect(loop.continue_run(context, config))
    with pytest.raises(ValueError):
        loop.stream_continue(context, config, runtime=runtime)


def test_continue_resumes_a_context_ending_with_a_user_message() -> None:
    context = AgentContext(system_prompt="", messages=[UserMessage(content="x")], tools=[])
    events = collect(loop.continue_run(context, LoopConfig(model=ScriptedModel(["hi"]))))
    assert isinstance(events[-1], AgentEnd)
    assert [m.role for m in events[-1].new_messages] == ["assistant"]


def test_steering_skips_not_started_calls_and_enters_before_the_next_call() -> None:
    gate = threading.Event()
    queued: list[Any] = []

    @tool
    def first() -> str:
        """Runs, then a steering message arrives."""
        queued.append(UserMessage(content="change of plan"))
        return "first done"

    @tool
    def second() -> str:
        """Never runs."""
        gate.set()
        return "second done"

    def steering() -> list[Any]:
        out = list(queued)
        queued.clear()
        return out

    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[call("a", "first"), call("b", "second")]), "ok"]
    )
    context = AgentContext(system_prompt="", messages=[], tools=[first, second])
    config = LoopConfig(model=model, get_steering_messages=steering)
    events = collect(loop.run([UserMessage(content="go")], context, config))
    end = events[-1]
    assert isinstance(end, AgentEnd)
    results = results_of(end.new_messages)
    assert not results["a"].is_error
    assert results["b"].details is not None and results["b"].details["outcome"] == "skipped"
    assert not gate.is_set()
    last_request = model.requests[-1].messages
    assert isinstance(last_request[-1], UserMessage) and last_request[-1].text == "change of plan"


def test_steering_is_asked_for_after_a_text_only_turn() -> None:
    model = ScriptedModel(["first", "second"])
    pending = [UserMessage(content="steer after text")]

    def steering() -> list[Any]:
        if model.call_count < 1:  # only once the first answer was asked for
            return []
        out = list(pending)
        pending.clear()
        return out

    context = AgentContext(system_prompt="", messages=[], tools=[])
    config = LoopConfig(model=model, get_steering_messages=steering)
    end = collect(loop.run([UserMessage(content="go")], context, config))[-1]
    assert [getattr(m, "text", "") for m in end.new_messages] == [
        "go",
        "first",
        "steer after text",
        "second",
    ]


class HungModel(llm.BaseChatModel):
    """Streams some text and half a tool call, then hangs until cancelled."""

    @property
    def info(self) -> llm.ModelInfo:
        return llm.ModelInfo(provider="test", model="hung")

    async def _stream(self, request: ChatRequest) -> Any:
        yield llm.TextDelta(text="thinking out loud")
        yield llm.ToolCallDelta(index=0, id="c", name="add", arguments='{"a": 1, ')
        await asyncio.sleep(SLOW)


@pytest.mark.timing
def test_abort_closes_a_hung_stream_and_drops_incomplete_tool_calls() -> None:
    context = AgentContext(system_prompt="", messages=[], tools=[add])
    signal = agent_runtime.AbortSignal()
    config = LoopConfig(model=HungModel(), retry=NO_RETRY)

    async def drive() -> list[Any]:
        out = []
        async for event in loop.run([UserMessage(content="go")], context, config, signal):
            out.append(event)
            if isinstance(event, MessageUpdate) and event.message.tool_calls:
                signal.abort("user_abort")  # mid-way through the tool call's arguments
        return out

    began = time.monotonic()
    events = asyncio.run(asyncio.wait_for(drive(), 3))
    assert time.monotonic() - began < 1.0
    assert isinstance(events[-1], Canceled)
    aborted = [
        e.message
        for e in events
        if isinstance(e, MessageEnd) and isinstance(e.message, AssistantMessage)
    ]
    assert aborted, "the aborted assistant message is reported"
    assert all(m.tool_calls == [] for m in aborted)
    assert not any(isinstance(e, ToolExecutionStart) for e in events)


def test_follow_ups_are_consumed_when_the_run_would_stop() -> None:
    follow = [UserMessage(content="and then?")]

    def follow_ups() -> list[Any]:
        out = list(follow)
        follow.clear()
        return out

    model = ScriptedModel(["first", "second"])
    context = AgentContext(system_prompt="", messages=[], tools=[])
    config = LoopConfig(model=model, get_follow_up_messages=follow_ups)
    end = collect(loop.run([UserMessage(content="go")], context, config))[-1]
    assert [getattr(m, "text", "") for m in end.new_messages] == [
        "go",
        "first",
        "and then?",
        "second",
    ]


def test_tools_run_sequentially_by_default_and_parallel_safe_ones_together() -> None:
    running = 0
    peak = 0
    lock = threading.Lock()
    both = threading.Barrier(2, timeout=2)

    @tool
    async def seq(n: int) -> str:
        """Sequential."""
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        await asyncio.sleep(0.01)
        with lock:
            running -= 1
        return f"seq{n}"

    @tool(parallel_safe=True)
    def par(n: int) -> str:
        """Parallel-safe: waits for its sibling, so it only passes when both run at once."""
        both.wait()
        return f"par{n}"

    calls = [call("s1", "seq", n=1), call("s2", "seq", n=2)]
    calls += [call("p1", "par", n=1), call("p2", "par", n=2)]
    model = ScriptedModel([ScriptedTurn(tool_calls=calls), "ok"])
    context = AgentContext(system_prompt="", messages=[], tools=[seq, par])
    end = collect(loop.run([UserMessage(content="go")], context, LoopConfig(model=model)))[-1]
    results = [m for m in end.new_messages if isinstance(m, ToolResultMessage)]
    assert [r.tool_call_id for r in results] == ["s1", "s2", "p1", "p2"]  # call order
    assert not any(r.is_error for r in results), [r.text for r in results]
    assert peak == 1


def test_parallel_safe_calls_run_at_most_max_tool_concurrency_at_once() -> None:
    running = 0
    peak = 0

    @tool(parallel_safe=True)
    async def par(n: int) -> str:
        """Parallel-safe."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1
        return str(n)

    calls = [call(f"p{i}", "par", n=i) for i in range(3)]
    model = ScriptedModel([ScriptedTurn(tool_calls=calls), "ok"])
    context = AgentContext(system_prompt="", messages=[], tools=[par])
    config = LoopConfig(model=model, max_tool_concurrency=2)
    end = collect(loop.run([UserMessage(content="go")], context, config))[-1]
    assert [m.tool_call_id for m in results_of(end.new_messages).values()] == ["p0", "p1", "p2"]
    assert peak == 2


def test_a_failed_attempts_tool_calls_never_run() -> None:
    ran: list[str] = []

    @tool
    def record() -> str:
        """Record the call."""
        ran.append("ran")
        return "ok"

    failing = ScriptedTurn(tool_calls=[call("x", "record")], error=llm.NetworkError("reset"))
    model = ScriptedModel([failing, "fine"])
    context = AgentContext(system_prompt="", messages=[], tools=[record])
    end = collect(
        loop.run([UserMessage(content="go")], context, LoopConfig(model=model, retry=FAST_RETRY))
    )[-1]
    assert isinstance(end, AgentEnd) and ran == []
    assert not any(isinstance(m, AssistantMessage) and m.tool_calls for m in end.new_messages)


def test_retryable_failures_are_retried_with_events_and_never_committed() -> None:
    failing = ScriptedTurn(chunks=["par", "tial"], error=llm.ProviderError("overloaded"))
    model = ScriptedModel([failing, "recovered"])
    context = AgentContext(system_prompt="", messages=[], tools=[])
    config = LoopConfig(model=model, retry=FAST_RETRY)
    events = collect(loop.run([UserMessage(content="go")], context, config))
    assert any(isinstance(e, ProviderRetry) for e in events)
    assert any(isinstance(e, ProviderRetryEnd) for e in events)
    end = events[-1]
    assert isinstance(end, AgentEnd)
    assert [getattr(m, "text", "") for m in end.new_messages] == ["go", "recovered"]


def test_a_provider_retry_after_is_honoured() -> None:
    failing = ScriptedTurn(error=llm.RateLimitError("slow down", retry_after=0.02))
    model = ScriptedModel([failing, "ok"])
    context = AgentContext(system_prompt="", messages=[], tools=[])
    config = LoopConfig(model=model, retry=FAST_RETRY)
    events = collect(loop.run([UserMessage(content="go")], context, config))
    (retry,) = [e for e in events if isinstance(e, ProviderRetry)]
    assert retry.delay >= 0.02


@pytest.mark.parametrize(
    "error",
    [
        llm.AuthenticationError("no"),
        llm.InvalidRequestError("bad"),
        llm.ContextLengthExceededError("long"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_non_retryable_errors_end_the_run_without_retry(error: Exception) -> None:
    model = ScriptedModel([ScriptedTurn(error=error), "never"])
    context = AgentContext(system_prompt="", messages=[], tools=[])
    events = collect(
        loop.run([UserMessage(content="go")], context, LoopConfig(model=model, retry=FAST_RETRY))
    )
    assert isinstance(events[-1], Error)
    assert model.call_count == 1
    assert not any(isinstance(e, ProviderRetry) for e in events)


def test_abort_pairs_every_call_abandons_running_tools_and_skips_unstarted_ones() -> None:
    started = threading.Event()
    release = threading.Event()

    @tool
    async def hang(ctx: ToolContext) -> str:
        """Report progress, then ignore the abort."""
        ctx.update("partial output")
        started.set()
        await asyncio.to_thread(release.wait, 5)
        return "late"

    calls = [call("h", "hang"), call("n", "hang")]
    model = ScriptedModel([ScriptedTurn(tool_calls=calls)])
    context = AgentContext(system_prompt="", messages=[], tools=[hang])
    signal = agent_runtime.AbortSignal()
    config = LoopConfig(model=model, abort_grace=0.05)

    async def drive() -> list[Any]:
        out = []
        async for event in loop.run([UserMessage(content="go")], context, config, signal):
            out.append(event)
            if isinstance(event, ToolExecutionUpdate):
                signal.abort("user_abort")
        release.set()  # the abandoned tool may end now; the run no longer waits for it
        return out

    try:
        events = asyncio.run(drive())
    finally:
        release.set()
    assert isinstance(events[-1], Canceled) and events[-1].reason == "user_abort"
    ends = {e.tool_call_id: e for e in events if isinstance(e, ToolExecutionEnd)}
    results = {
        e.message.tool_call_id: e.message
        for e in events
        if isinstance(e, MessageEnd) and isinstance(e.message, ToolResultMessage)
    }
    result_ids = [
        e.message.tool_call_id
        for e in events
        if isinstance(e, MessageEnd) and isinstance(e.message, ToolResultMessage)
    ]
    assert sorted(result_ids) == ["h", "n"]  # exactly one result per call, before Canceled
    running = results["h"].details or {}
    assert running.get("cancelled") is True and running.get("outcome") == "unknown"
    assert "partial output" in results["h"].text
    assert (results["n"].details or {}).get("outcome") == "not_started"
    assert "h" in ends


def test_a_run_past_max_tool_turns_ends_with_an_explanatory_message() -> None:
    turns = [ScriptedTurn(tool_calls=[call(f"c{i}", "as_text")]) for i in range(3)]
    model = ScriptedModel(turns)
    context = AgentContext(system_prompt="", messages=[], tools=TOOLS)
    config = LoopConfig(model=model, max_tool_turns=1)
    end = collect(loop.run([UserMessage(content="go")], context, config))[-1]
    assert isinstance(end, AgentEnd)
    last = end.new_messages[-1]
    assert isinstance(last, AssistantMessage) and last.text


# == 8. LLM layer ===============================================================================


def test_chat_model_protocol_methods() -> None:
    model = ScriptedModel(["hi"])
    assert isinstance(model, ChatModel)
    for name in ("generate", "stream", "prompt", "generate_sync", "prompt_sync", "info"):
        assert hasattr(ChatModel, name), name
    assert inspect.iscoroutinefunction(type(model).generate)
    assert inspect.iscoroutinefunction(type(model).prompt)
    check_signature(type(model).generate, ("request", EMPTY), keyword=(("signal", None),))
    check_signature(type(model).stream, ("request", EMPTY), keyword=(("signal", None),))
    check_signature(type(model).prompt, ("text", EMPTY), ("system", None))
    check_signature(type(model).generate_sync, ("request", EMPTY))
    check_signature(type(model).prompt_sync, ("text", EMPTY), ("system", None))
    info = model.info
    assert isinstance(info, llm.ModelInfo)
    assert (info.provider, info.model) == ("scripted", "scripted") and info.capabilities


def test_sync_twins_work_in_plain_scripts() -> None:
    model = ScriptedModel(["one", "two"])
    response = model.generate_sync(ChatRequest(messages=[UserMessage(content="x")]))
    assert isinstance(response, ChatResponse) and response.message.text == "one"
    assert model.prompt_sync("hi", "sys") == "two"
    assert model.requests[1].system == "sys"


def test_stream_is_an_async_iterator_of_chunks() -> None:
    model = ScriptedModel([ScriptedTurn(chunks=["he", "llo"])])
    chunks = collect(model.stream(ChatRequest(messages=[UserMessage(content="x")])))
    texts = [c.text for c in chunks if isinstance(c, llm.TextDelta)]
    assert texts == ["he", "llo"]


def test_chat_request_fields() -> None:
    assert set(field_names(ChatRequest)) >= {
        "messages",
        "system",
        "tools",
        "tool_choice",
        "temperature",
        "max_output_tokens",
        "response_schema",
        "reasoning",
    }
    assert field_names(ChatRequest)[:8] == [
        "messages",
        "system",
        "tools",
        "tool_choice",
        "temperature",
        "max_output_tokens",
        "response_schema",
        "reasoning",
    ]


def test_chat_response_fields_and_usage_fields() -> None:
    assert {"message", "usage", "stop_reason", "cost"} <= set(field_names(ChatResponse))
    assert field_names(Usage)[:3] == ["input_tokens", "output_tokens", "cached_input_tokens"]
    response = ScriptedModel(["hi"]).generate_sync(ChatRequest(messages=[]))
    assert isinstance(response.message, AssistantMessage)
    assert isinstance(response.usage, Usage)
    assert response.stop_reason == "stop"
    assert hasattr(response, "cost")


def test_builder_assembles_tool_call_fragments_by_index_and_replaces_usage() -> None:
    builder = ChatResponseBuilder()
    for chunk in [
        llm.ToolCallDelta(index=0, id="a", name="f", arguments='{"x":'),
        llm.ToolCallDelta(index=1, id="b", name="g", arguments='{"y": 2}'),
        llm.ToolCallDelta(index=0, arguments=" 1}"),
        llm.UsageDelta(usage=Usage(input_tokens=5, output_tokens=1)),
        llm.UsageDelta(usage=Usage(input_tokens=5, output_tokens=3)),
        llm.FinishDelta(reason="tool_use"),
    ]:
        builder.add(chunk)
    response = builder.build()
    calls = response.message.tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("a", "f", {"x": 1}),
        ("b", "g", {"y": 2}),
    ]
    assert response.usage == Usage(input_tokens=5, output_tokens=3)


def test_builder_tolerates_truncation() -> None:
    builder = ChatResponseBuilder()
    builder.add(llm.TextDelta(text="cut o"))
    builder.add(llm.ToolCallDelta(index=0, id="a", name="f", arguments='{"x": 1, "y'))
    builder.add(llm.FinishDelta(reason="length"))
    response = builder.build()
    assert response.message.text == "cut o" and response.stop_reason == "length"


def test_adapter_factory_signatures() -> None:
    check_signature(llm.openai_compatible, ("base_url", EMPTY), ("model", EMPTY), ("api_key", None))
    check_signature(llm.anthropic, ("model", EMPTY), ("api_key", None))
    check_signature(llm.gemini, ("model", EMPTY), ("api_key", None))
    for factory in (llm.openai_compatible, llm.anthropic, llm.gemini):
        assert "base_url" in inspect.signature(factory).parameters
    check_signature(llm.from_config, ("name", None))


def test_from_config_builds_a_model_from_a_profile() -> None:
    model = llm.from_config("scripted")
    assert isinstance(model, ChatModel)


@pytest.mark.parametrize(
    "wrap",
    [
        lambda m: llm.RetryingModel(m),
        lambda m: llm.FallbackModel([m]),
        lambda m: llm.CachingModel(m),
        lambda m: llm.ObservableModel(m),
        lambda m: llm.SwitchableModel(m),
    ],
    ids=["RetryingModel", "FallbackModel", "CachingModel", "ObservableModel", "SwitchableModel"],
)
def test_middleware_is_a_chat_model_wrapping_a_chat_model(wrap: Callable[[Any], Any]) -> None:
    wrapped = wrap(ScriptedModel(["inner"]))
    assert isinstance(wrapped, ChatModel)
    assert wrapped.prompt_sync("x") == "inner"


def test_fallback_model_fails_over_to_the_next_model() -> None:
    broken = ScriptedModel([ScriptedTurn(error=llm.ProviderError("down"))])
    model = llm.FallbackModel([broken, ScriptedModel(["backup"])])
    assert model.prompt_sync("x") == "backup"


LLM_ERRORS: list[tuple[type[llm.LLMError], bool]] = [
    (llm.AuthenticationError, False),
    (llm.PermissionDeniedError, False),
    (llm.RateLimitError, True),
    (llm.QuotaExceededError, False),
    (llm.InvalidRequestError, False),
    (llm.ContextLengthExceededError, False),
    (llm.ModelNotFoundError, False),
    (llm.ProviderError, True),
    (llm.NetworkError, True),
    (llm.CapabilityNotSupportedError, False),
]


@pytest.mark.parametrize(("cls", "retryable"), LLM_ERRORS, ids=lambda c: getattr(c, "__name__", ""))
def test_llm_errors_carry_code_retryable_status_retry_after(
    cls: type[llm.LLMError], retryable: bool
) -> None:
    assert issubclass(cls, llm.LLMError)
    assert issubclass(llm.LLMError, agent_runtime.AgentRuntimeError)
    check_signature(cls, ("message", EMPTY), ("retry_after", None))
    error = cls("went wrong")
    assert isinstance(error.code, str) and error.code
    assert error.retryable is retryable
    assert error.retry_after is None
    assert error.status is None or isinstance(error.status, int)
    assert cls("again", 1.5).retry_after == 1.5
    assert getattr(agent_runtime, cls.__name__) is cls


def test_llm_error_statuses_default_from_the_class() -> None:
    assert llm.AuthenticationError("x").status == 401
    assert llm.RateLimitError("x").status == 429
    assert llm.ModelNotFoundError("x").status == 404
    assert llm.RateLimitError("x", status=503).status == 503


def test_scripted_turn_signature_and_defaults() -> None:
    names = [p.name for p in parameters(ScriptedTurn)][:6]
    assert names == ["text", "tool_calls", "chunks", "delay", "chunk_delay", "error"]
    turn = ScriptedTurn()
    assert (turn.text, turn.tool_calls, turn.chunks, turn.delay, turn.chunk_delay, turn.error) == (
        "",
        [],
        None,
        0.0,
        0.0,
        None,
    )
    positional = ScriptedTurn("hi", [], ["h", "i"], 0.0, 0.0, None)
    assert positional.text == "hi"


def test_scripted_model_consumes_one_turn_per_call_and_records_requests() -> None:
    first = parameters(ScriptedModel)[0]
    assert first.name == "turns" and first.kind in PLAIN
    model = ScriptedModel([ScriptedTurn(text="a"), ScriptedTurn(text="b")])
    assert model.prompt_sync("1") == "a"
    assert model.prompt_sync("2") == "b"
    assert model.call_count == 2
    assert [r.messages[-1].text for r in model.requests] == ["1", "2"]


def test_scripted_turn_error_is_raised_after_the_chunks() -> None:
    turn = ScriptedTurn(chunks=["x", "y"], error=llm.ProviderError("late"))
    model = ScriptedModel([turn])
    got: list[Any] = []

    async def read() -> None:
        async for chunk in model.stream(ChatRequest(messages=[])):
            got.append(chunk)

    with pytest.raises(llm.ProviderError):
        asyncio.run(read())
    assert [c.text for c in got if isinstance(c, llm.TextDelta)] == ["x", "y"]


@pytest.mark.timing
def test_scripted_turn_delay_waits_before_the_first_chunk() -> None:
    model = ScriptedModel([ScriptedTurn(text="x", delay=0.02)])
    began = time.monotonic()
    assert model.prompt_sync("x") == "x"
    assert time.monotonic() - began >= 0.015


def wire_model(server: MockProviderServer, wire: str, api_key: Any = "k", **options: Any) -> Any:
    base = server.base_url(wire)
    if wire == "openai":
        return llm.openai_compatible(base, "m", api_key, **options)
    if wire == "anthropic":
        return llm.anthropic("m", api_key, base_url=base, **options)
    return llm.gemini("m", api_key, base_url=base, **options)


@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini"])
def test_mock_provider_server_serves_scripts_in_each_wire_format(wire: str) -> None:
    with MockProviderServer([ScriptedTurn(text="over http")]) as server:
        assert server.url.startswith("http://127.0.0.1:")
        model = wire_model(server, wire)
        assert model.prompt_sync("x", timeout=3) == "over http"
        assert len(server.requests) == 1


@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini"])
def test_a_callable_api_key_is_resolved_on_every_request(wire: str) -> None:
    keys = iter(["key-one", "key-two"])
    with MockProviderServer(["a", "b"]) as server:
        model = wire_model(server, wire, api_key=lambda: next(keys))
        model.prompt_sync("x", timeout=3)
        model.prompt_sync("y", timeout=3)
        sent = [
            " ".join([*r.headers.values(), *map(str, r.query.values())]) for r in server.requests
        ]
    assert "key-one" in sent[0] and "key-two" in sent[1]


@pytest.mark.timing
def test_cancelling_the_awaiting_task_closes_the_http_response() -> None:
    from agent_runtime.testing import MockResponse

    with MockProviderServer([MockResponse(turn=ScriptedTurn(text="late"), delay=SLOW)]) as server:
        model = wire_model(server, "openai")

        async def scenario() -> float:
            task = asyncio.ensure_future(model.generate(ChatRequest(messages=[])))
            while not server.requests:
                await asyncio.sleep(0.005)
            cancelled_at = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return (await server.disconnected(timeout=2)) - cancelled_at

        assert asyncio.run(scenario()) < 1.0


def test_an_abort_signal_closes_the_http_response() -> None:
    from agent_runtime.testing import MockResponse

    with MockProviderServer([MockResponse(turn=ScriptedTurn(text="late"), delay=SLOW)]) as server:
        model = wire_model(server, "openai")
        signal = agent_runtime.AbortSignal()

        async def scenario() -> None:
            task = asyncio.ensure_future(model.generate(ChatRequest(messages=[]), signal=signal))
            while not server.requests:
                await asyncio.sleep(0.005)
            signal.abort("stop")
            with pytest.raises(Exception):  # noqa: B017 - Aborted or CancelledError
                await asyncio.wait_for(task, 2)
            await server.disconnected(timeout=2)

        asyncio.run(scenario())


# == 11. details the contract also fixes =========================================================


@pytest.mark.parametrize(
    "name",
    [
        "AgentBusy",
        "CannotContinue",
        "AgentStopped",
        "AlreadyRegistered",
        "RunFailed",
        "RunCanceled",
        "Runtime",
        "AgentKey",
        "tool",
        "Tool",
        "ToolResult",
        "ToolContext",
        "RetryPolicy",
    ],
)
def test_top_level_names_are_importable(name: str) -> None:
    assert hasattr(agent_runtime, name)
    assert name in agent_runtime.__all__


def test_supervisors_all_lists_the_design_names() -> None:
    import supervisors

    for name in (
        "ChildSpec",
        "Supervisor",
        "DynamicSupervisor",
        "TaskSupervisor",
        "AsyncTaskSupervisor",
        "SupervisedActor",
        "kill",
        "MaxChildrenReached",
    ):
        assert name in supervisors.__all__


def test_error_classes_carry_their_facts() -> None:
    failed = RunFailed("why", None)
    assert (failed.reason, failed.partial) == ("why", None)
    canceled = RunCanceled("user_abort")
    assert canceled.reason == "user_abort"
    for name in ("AgentBusy", "CannotContinue", "AgentStopped", "AlreadyRegistered"):
        assert issubclass(getattr(agent_runtime, name), agent_runtime.AgentRuntimeError)
    assert issubclass(RunFailed, agent_runtime.AgentRuntimeError)


def test_an_aborted_run_leaves_a_valid_transcript_and_continue_run_works(
    runtime: Runtime,
) -> None:

    @tool
    def blocking(ctx: ToolContext) -> str:
        """Block until the run is aborted (a cooperative tool)."""
        ctx.signal.wait(5)
        return "done"

    calls = [call("a", "blocking"), call("b", "blocking")]
    model = ScriptedModel([ScriptedTurn(tool_calls=calls), "after abort"])
    agent = runtime.start_agent(("s", "r", 0), model=model, tools=[blocking])
    agent.prompt("go")
    wait_until(lambda: agent.state().pending_tool_calls, timeout=3)
    agent.abort()
    agent.wait_for_idle(timeout=3)
    history = agent.state().messages
    call_ids = [c.id for m in history if isinstance(m, AssistantMessage) for c in m.tool_calls]
    result_ids = [m.tool_call_id for m in history if isinstance(m, ToolResultMessage)]
    assert sorted(call_ids) == sorted(result_ids)
    agent.continue_run()
    agent.wait_for_idle(timeout=3)
    assert agent.state().messages[-1].text == "after abort"


def test_one_at_a_time_delivers_one_steering_message_per_model_call(runtime: Runtime) -> None:
    gate = threading.Event()

    @tool
    def wait_for_steering() -> str:
        """Block until the test queued its steering messages."""
        gate.wait(5)
        return "waited"

    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[call("a", "wait_for_steering")]), "saw one", "saw two"]
    )
    agent = runtime.start_agent(("s", "r", 0), model=model, tools=[wait_for_steering])
    agent.prompt("go")
    wait_until(lambda: agent.state().pending_tool_calls, timeout=3)
    agent.steer("first steer")
    agent.steer("second steer")
    gate.set()
    agent.wait_for_idle(timeout=3)
    assert model.call_count == 3
    steering_seen = [
        [m.text for m in r.messages if isinstance(m, UserMessage) and "steer" in m.text]
        for r in model.requests
    ]
    assert steering_seen == [[], ["first steer"], ["first steer", "second steer"]]


def test_all_mode_delivers_every_queued_steering_message_at_once(runtime: Runtime) -> None:
    gate = threading.Event()

    @tool
    def wait_for_steering() -> str:
        """Block until the test queued its steering messages."""
        gate.wait(5)
        return "waited"

    model = ScriptedModel([ScriptedTurn(tool_calls=[call("a", "wait_for_steering")]), "saw both"])
    agent = runtime.start_agent(
        ("s", "r", 0), model=model, tools=[wait_for_steering], steering_mode="all"
    )
    agent.prompt("go")
    wait_until(lambda: agent.state().pending_tool_calls, timeout=3)
    agent.steer("first steer")
    agent.steer("second steer")
    gate.set()
    agent.wait_for_idle(timeout=3)
    assert model.call_count == 2
    last = [m.text for m in model.requests[-1].messages if isinstance(m, UserMessage)]
    assert last[-2:] == ["first steer", "second steer"]


def test_thinking_budgets_come_from_the_runtime_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTRACT_TEST_ANTHROPIC_KEY", "sk-test")
    with MockProviderServer(["thought"]) as server:
        config = agent_runtime.RuntimeConfig.model_validate(
            {
                "thinking_budgets": {"high": 12345},
                "llm": {
                    "default_profile": "mock",
                    "profiles": {
                        "mock": {
                            "provider": "anthropic",
                            "model": "m",
                            "base_url": server.base_url("anthropic"),
                            "api_key_env": "CONTRACT_TEST_ANTHROPIC_KEY",
                        }
                    },
                },
            }
        )
        with Runtime.start(config) as rt:
            rt.start_agent(("s", "r", 0), thinking_level="high").run("x", timeout=3)
        body = server.requests[0].json
    assert body["thinking"]["budget_tokens"] == 12345


@pytest.mark.parametrize(
    ("wire", "check"),
    [
        ("openai", lambda body: body.get("reasoning_effort") == "high"),
        ("anthropic", lambda body: body.get("thinking", {}).get("budget_tokens") == 16384),
        ("gemini", lambda body: "thinkingConfig" in body.get("generationConfig", {})),
    ],
)
def test_thinking_level_maps_to_provider_reasoning_parameters(
    runtime: Runtime, wire: str, check: Callable[[dict[str, Any]], bool]
) -> None:
    assert runtime.config.thinking_budgets.high == 16384
    with MockProviderServer(["thought"]) as server:
        agent = runtime.start_agent(
            ("s", wire, 0), model=wire_model(server, wire), thinking_level="high"
        )
        agent.run("x", timeout=3)
        body = server.requests[0].json
    assert check(body), body


@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini"])
def test_thinking_level_off_sends_no_reasoning_parameters(runtime: Runtime, wire: str) -> None:
    with MockProviderServer(["plain"]) as server:
        agent = runtime.start_agent(
            ("s", wire, 0), model=wire_model(server, wire), thinking_level="off"
        )
        agent.run("x", timeout=3)
        body = server.requests[0].json
    assert "reasoning_effort" not in body
    assert "thinking" not in body
    assert "thinkingConfig" not in body.get("generationConfig", {})


def test_sync_tools_run_off_the_shared_event_loop_and_async_tools_on_it(
    runtime: Runtime,
) -> None:
    seen: dict[str, Any] = {}

    @tool
    def sync_probe() -> str:
        """Where do sync tools run."""
        try:
            asyncio.get_running_loop()
            seen["sync_on_loop"] = True
        except RuntimeError:
            seen["sync_on_loop"] = False
        seen["sync_thread"] = threading.get_ident()
        return "ok"

    @tool
    async def async_probe() -> str:
        """Where do async tools run."""
        seen.setdefault("loops", []).append(asyncio.get_running_loop())
        seen.setdefault("threads", []).append(threading.get_ident())
        return "ok"

    for index in range(2):
        calls = [call("s", "sync_probe"), call("a", "async_probe")]
        model = ScriptedModel([ScriptedTurn(tool_calls=calls), "ok"])
        agent = runtime.start_agent(
            (f"s{index}", "r", index), model=model, tools=[sync_probe, async_probe]
        )
        agent.run("go", timeout=3)
    assert seen["sync_on_loop"] is False
    assert seen["loops"][0] is seen["loops"][1]  # one shared event loop per runtime
    assert seen["sync_thread"] not in seen["threads"]


def test_runtime_tools_is_a_tool_registry(runtime: Runtime) -> None:
    registry = runtime.tools
    assert isinstance(registry, agent_runtime.ToolRegistry)
    check_signature(type(registry).register, ("tool", EMPTY))
    check_signature(type(registry).unregister, ("name", EMPTY))
    check_signature(type(registry).get, ("name", EMPTY))
    check_signature(type(registry).all)
    registry.register(add)
    assert registry.get("add") is add
    assert registry.all() == [add]
    assert registry.unregister("add") in (True, None)
    assert registry.get("add") is None


def test_agent_with_a_tool_registry_object_sees_its_tools(runtime: Runtime) -> None:
    registry = agent_runtime.ToolRegistry()
    registry.register(add)
    model = ScriptedModel([ScriptedTurn(tool_calls=[call("d", "add", a=2, b=2)]), "ok"])
    agent = runtime.start_agent(("s", "r", 0), model=model, tool_registry=registry)
    assert results_of(agent.run("go", timeout=3).new_messages)["d"].text == "4"


def test_agent_with_tool_registry_sees_registered_tools_own_winning(runtime: Runtime) -> None:
    @tool(name="as_text")
    def own_as_text() -> str:
        """The agent's own version."""
        return "own"

    runtime.tools.register(as_text)
    runtime.tools.register(add)
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[call("c", "as_text"), call("d", "add", a=1, b=2)]), "ok"]
    )
    agent = runtime.start_agent(("s", "r", 0), model=model, tools=[own_as_text], tool_registry=True)
    result = agent.run("go", timeout=3)
    results = results_of(result.new_messages)
    assert results["c"].text == "own"
    assert results["d"].text == "3"
    assert sorted(t.name for t in model.requests[0].tools) == ["add", "as_text"]
