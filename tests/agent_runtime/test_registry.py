"""AgentRegistry: unique keys, one winner under a race, cleanup on any actor exit."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator

import pykka
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_runtime import AgentKey, AlreadyRegistered
from agent_runtime.registry import AgentRegistry
from agent_runtime.testing import wait_until
from supervisors import SupervisedActor, kill


class Worker(SupervisedActor):
    def on_receive(self, message: object) -> object:
        if message == "crash":
            raise RuntimeError("crash requested")
        return None


@pytest.fixture
def refs() -> Iterator[list[pykka.ActorRef[Worker]]]:
    started: list[pykka.ActorRef[Worker]] = []
    yield started
    for ref in started:
        if ref.is_alive():
            ref.stop()


def test_register_and_lookup_by_key_or_plain_tuple() -> None:
    registry: AgentRegistry[str] = AgentRegistry()
    key = registry.register(("s1", "research", 0), "agent-a", metadata={"model": "m"})
    assert key == AgentKey("s1", "research", 0)
    assert registry.lookup(AgentKey("s1", "research", 0)) == "agent-a"
    assert registry.lookup(("s1", "research", 0)) == "agent-a"
    assert registry.lookup_with_metadata(key) == ("agent-a", {"model": "m"})
    assert registry.lookup(("s1", "research", 1)) is None


def test_second_registration_of_a_live_key_names_the_holder() -> None:
    registry: AgentRegistry[str] = AgentRegistry()
    registry.register(("s", "r", 0), "first")
    with pytest.raises(AlreadyRegistered) as info:
        registry.register(("s", "r", 0), "second")
    assert info.value.holder == "first"
    assert registry.lookup(("s", "r", 0)) == "first"


def test_exactly_one_winner_under_a_race() -> None:
    registry: AgentRegistry[int] = AgentRegistry()
    barrier = threading.Barrier(16)
    winners: list[int] = []
    losers: list[int] = []

    def contend(i: int) -> None:
        barrier.wait()
        try:
            registry.register(("race", "r", 0), i)
            winners.append(i)
        except AlreadyRegistered:
            losers.append(i)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5)
    assert len(winners) == 1 and len(losers) == 15
    assert registry.lookup(("race", "r", 0)) == winners[0]


@pytest.mark.parametrize("how", ["stop", "crash", "kill"])
def test_entry_disappears_when_its_actor_exits(
    how: str, refs: list[pykka.ActorRef[Worker]]
) -> None:
    registry: AgentRegistry[str] = AgentRegistry()
    ref = Worker.start()
    refs.append(ref)
    registry.register(("s", "r", 0), "agent", ref=ref)
    assert registry.count() == 1
    if how == "stop":
        ref.stop()
    elif how == "crash":
        ref.tell("crash")
    else:
        kill(ref)
    wait_until(lambda: registry.lookup(("s", "r", 0)) is None, timeout=5)
    assert registry.count() == 0
    registry.register(("s", "r", 0), "replacement")
    assert registry.lookup(("s", "r", 0)) == "replacement"


def test_registering_a_dead_actor_leaves_no_entry(refs: list[pykka.ActorRef[Worker]]) -> None:
    registry: AgentRegistry[str] = AgentRegistry()
    ref = Worker.start()
    ref.stop()
    registry.register(("s", "r", 0), "ghost", ref=ref)
    assert registry.lookup(("s", "r", 0)) is None


def test_a_replaced_entry_is_not_removed_by_the_old_actor_exit(
    refs: list[pykka.ActorRef[Worker]],
) -> None:
    registry: AgentRegistry[str] = AgentRegistry()
    old, new = Worker.start(), Worker.start()
    refs.extend([old, new])
    registry.register(("s", "r", 0), "old", ref=old)
    registry.unregister(("s", "r", 0))
    registry.register(("s", "r", 0), "new", ref=new)
    old.stop()
    assert registry.lookup(("s", "r", 0)) == "new"


class Value:
    pass


@pytest.mark.parametrize("how", ["exit", "unregister"])
def test_an_entry_that_went_lets_go_of_its_value_without_the_collector(
    how: str, refs: list[pykka.ActorRef[Worker]]
) -> None:
    # An entry and its actor monitor must not be a reference cycle: each agent a server
    # stops would leave its handle and state to the cyclic collector.
    registry: AgentRegistry[Value] = AgentRegistry()
    ref = Worker.start()
    refs.append(ref)
    value = Value()
    gone = weakref.ref(value)
    registry.register(("s", "r", 0), value, ref=ref)
    del value
    gc.collect()
    gc.disable()
    try:
        if how == "exit":
            ref.stop()
        else:
            registry.unregister(("s", "r", 0))
        wait_until(lambda: gone() is None, timeout=5, what="the entry's value was freed")
    finally:
        gc.enable()


def test_listings_by_session_and_role() -> None:
    registry: AgentRegistry[str] = AgentRegistry()
    registry.register(("s1", "main", 0), "a")
    registry.register(("s1", "research", 1), "b")
    registry.register(("s1", "research", 0), "c")
    registry.register(("s2", "research", 0), "d")
    assert registry.list_by_session("s1") == [
        ("main", 0, "a"),
        ("research", 0, "c"),
        ("research", 1, "b"),
    ]
    assert registry.list_by_role("research") == [("s1", 0, "c"), ("s1", 1, "b"), ("s2", 0, "d")]
    assert registry.count() == 4
    assert registry.count_by_session("s1") == 3
    assert [k for k, _ in registry.list()] == sorted(k for k, _ in registry.list())


def test_next_index_is_the_smallest_free_index() -> None:
    registry: AgentRegistry[str] = AgentRegistry()
    assert registry.next_index("s", "r") == 0
    registry.register(("s", "r", 0), "a")
    registry.register(("s", "r", 2), "c")
    assert registry.next_index("s", "r") == 1
    registry.register(("s", "r", 1), "b")
    assert registry.next_index("s", "r") == 3
    assert registry.next_index("s", "other") == 0


def test_update_metadata_merges() -> None:
    registry: AgentRegistry[str] = AgentRegistry()
    registry.register(("s", "r", 0), "a", metadata={"x": 1})
    assert registry.update_metadata(("s", "r", 0), y=2)
    assert registry.lookup_with_metadata(("s", "r", 0)) == ("a", {"x": 1, "y": 2})
    assert not registry.update_metadata(("s", "r", 9), y=2)


@pytest.mark.parametrize(
    ("key", "named"),
    [
        (("", "r", 0), "session"),
        (("s", "", 0), "role"),
        (("s", "r", -1), "index"),
        (("s", "r", "0"), "index"),
        ((1, "r", 0), "session"),
        (("s", "r", True), "index"),
        (("s", "r"), "tuple"),
        ("s/r/0", "tuple"),
    ],
)
def test_bad_keys_are_rejected_naming_the_part(key: object, named: str) -> None:
    registry: AgentRegistry[str] = AgentRegistry()
    with pytest.raises(ValueError, match=named):
        registry.register(key, "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=named):
        registry.lookup(key)  # type: ignore[arg-type]


keys = st.tuples(st.sampled_from(["s1", "s2"]), st.sampled_from(["a", "b"]), st.integers(0, 3))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["register", "unregister"]), keys), max_size=40))
def test_registry_matches_a_dict_model(ops: list[tuple[str, tuple[str, str, int]]]) -> None:
    registry: AgentRegistry[int] = AgentRegistry()
    model: dict[tuple[str, str, int], int] = {}
    for n, (op, key) in enumerate(ops):
        if op == "register":
            if key in model:
                with pytest.raises(AlreadyRegistered):
                    registry.register(key, n)
            else:
                registry.register(key, n)
                model[key] = n
        else:
            assert registry.unregister(key) == (key in model)
            model.pop(key, None)
    assert registry.list() == sorted((AgentKey(*k), v) for k, v in model.items())
    assert registry.count() == len(model)
    for session in ("s1", "s2"):
        assert registry.count_by_session(session) == sum(1 for k in model if k[0] == session)
