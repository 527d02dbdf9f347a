"""`MemoryStore.state_compare_and_set`, the conditional write of the key-value state, on every
store (in-memory, SQLite, Postgres): it writes only over the text it was told, of racing
writers with one expectation exactly one wins, and increments made through it are never lost,
also between separate store objects on one database (as separate processes are)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from agent_runtime.memory import MemoryStore
from tests.agent_runtime.memory.conftest import open_store


def test_sets_an_absent_key_only_when_none_is_expected(store: MemoryStore) -> None:
    assert store.state_compare_and_set("s", "k", None, '"a"') is True
    assert store.state_get("s", "k") == '"a"'
    assert store.state_compare_and_set("s", "k", None, '"b"') is False
    assert store.state_get("s", "k") == '"a"'
    assert store.state_compare_and_set("s", "other", '"a"', '"c"') is False
    assert store.state_get("s", "other") is None
    assert store.state_items("s") == {"k": '"a"'}


def test_replaces_only_the_exact_text_expected(store: MemoryStore) -> None:
    store.state_put("s", "k", '{"n":1}')
    assert store.state_compare_and_set("s", "k", '{"n": 1}', '{"n":2}') is False  # not the text
    assert store.state_compare_and_set("s", "k", '{"n":1}', '{"n":2}') is True
    assert store.state_compare_and_set("s", "k", '{"n":1}', '{"n":3}') is False  # stale
    assert store.state_get("s", "k") == '{"n":2}'
    assert store.state_items("other") == {}


@pytest.mark.parametrize(
    ("expected", "value", "error"),
    [(1, '"v"', TypeError), ('"v"', None, TypeError), ('"v"', b"1", TypeError)],
)
def test_bad_arguments_are_refused_by_name(
    store: MemoryStore, expected: object, value: object, error: type[Exception]
) -> None:
    with pytest.raises(error, match="invalid"):
        store.state_compare_and_set("s", "k", expected, value)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="session"):
        store.state_compare_and_set("", "k", None, "1")
    with pytest.raises(ValueError, match="key"):
        store.state_compare_and_set("s", "", None, "1")
    assert store.state_items("s") == {}


def test_a_closed_store_refuses_it(store: MemoryStore) -> None:
    store.close()
    with pytest.raises(ValueError, match="closed"):
        store.state_compare_and_set("s", "k", None, "1")


def test_of_racing_writers_with_one_expectation_exactly_one_wins(store: MemoryStore) -> None:
    store.state_put("s", "k", "0")
    start = threading.Barrier(8)
    wins: list[int] = []

    def race(n: int) -> None:
        start.wait(timeout=30)
        if store.state_compare_and_set("s", "k", "0", str(n + 1)):
            wins.append(n)

    threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(wins) == 1
    assert store.state_get("s", "k") == str(wins[0] + 1)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_increments_through_separate_store_objects_are_never_lost(
    request: pytest.FixtureRequest, kind: str, tmp_path: Path
) -> None:
    stores = [open_store(request, kind, tmp_path) for _ in range(3)]
    per_writer = 20

    def increment(store: MemoryStore) -> None:
        for _ in range(per_writer):
            while True:
                current = store.state_get("s", "counter")
                following = str(int(current or "0") + 1)
                if store.state_compare_and_set("s", "counter", current, following):
                    break

    try:
        threads = [threading.Thread(target=increment, args=(s,)) for s in stores]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert stores[0].state_get("s", "counter") == str(per_writer * len(stores))
    finally:
        for opened in stores:
            opened.close()
