"""Prompt templates (`agent_runtime.templates.PromptTemplates`) on every memory store: init,
update, get, delete, the kept history of versions, subscriptions, and the checks of ids and
texts."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_runtime import StreamOverflow
from agent_runtime.memory import SessionMemory, SqliteStore
from agent_runtime.templates import (
    SESSION,
    PromptTemplates,
    Template,
    TemplateNotFound,
    TemplateParameterMissing,
    TemplateSubscription,
    TemplateVersion,
)
from tests.agent_runtime.memory.conftest import STORE_KINDS, open_store


@pytest.fixture(params=STORE_KINDS)
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionMemory]:
    with SessionMemory(open_store(request, request.param, tmp_path)) as opened:
        yield opened


@pytest.fixture
def templates(memory: SessionMemory) -> PromptTemplates:
    return PromptTemplates.of(memory)


def test_init_writes_only_a_missing_template(templates: PromptTemplates) -> None:
    assert templates.init("greeter", "Hello {name}.") is True
    assert templates.init("greeter", "Something else") is False
    assert templates.get("greeter") == "Hello {name}."


def test_update_versions_every_change_and_get_reads_the_newest(
    templates: PromptTemplates,
) -> None:
    templates.init("greeter", "v1")
    assert templates.update("greeter", "v2") == 2
    assert templates.update("greeter", "v3") == 3
    assert templates.get("greeter") == "v3"
    history = templates.history("greeter")
    assert [(v.version, v.text) for v in history] == [(1, "v1"), (2, "v2"), (3, "v3")]
    assert all(v.at.tzinfo is not None for v in history)


def test_delete_keeps_the_history_and_versions_go_on_after_it(
    templates: PromptTemplates,
) -> None:
    templates.update("greeter", "v1")
    assert templates.delete("greeter") is True
    assert templates.delete("greeter") is False
    assert templates.get_optional("greeter") is None
    with pytest.raises(TemplateNotFound, match="'greeter'"):
        templates.get("greeter")
    assert templates.init("greeter", "again") is True
    history = templates.history("greeter")
    assert [(v.version, v.text, v.deleted) for v in history] == [
        (1, "v1", False),
        (2, None, True),
        (3, "again", False),
    ]


def test_a_template_never_written_has_no_text_and_no_history(
    templates: PromptTemplates,
) -> None:
    assert templates.get_optional("nothing") is None
    assert templates.history("nothing") == []
    assert templates.delete("nothing") is False


def test_ids_list_live_templates_and_histories_do_not_mix(templates: PromptTemplates) -> None:
    templates.update("a", "A1")
    templates.update("a:b", "AB1")  # an id that extends another's
    templates.update("b", "B1")
    templates.delete("b")
    assert templates.ids() == ["a", "a:b"]
    assert [v.text for v in templates.history("a")] == ["A1"]
    assert [v.text for v in templates.history("a:b")] == ["AB1"]


def test_templates_leave_the_sessions_and_their_state_alone(memory: SessionMemory) -> None:
    memory.kv("s").put("k", 1)
    PromptTemplates.of(memory).update("greeter", "hi")
    assert memory.kv("s").items() == {"k": 1}
    assert SESSION not in memory.store.sessions()


def test_render_fills_parameters_and_names_a_missing_one(templates: PromptTemplates) -> None:
    templates.update("greeter", "Hello {name}, {{literal}} from {city}.")
    rendered = templates.render(Template("greeter", name="Ada", city="Oslo", unused=1))
    assert rendered == "Hello Ada, {literal} from Oslo."
    with pytest.raises(TemplateParameterMissing, match=r"'greeter'.*'city'") as caught:
        templates.render(Template("greeter", name="Ada"))
    assert caught.value.parameter == "city" and caught.value.template_id == "greeter"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("Hi {0}", "{0}"), ("Hi {a.b}", "{a.b}"), ("Hi {a!r}", "{a!r}"), ("Hi {", "brace")],
)
def test_a_text_with_a_bad_placeholder_is_refused_and_not_stored(
    templates: PromptTemplates, text: str, fragment: str
) -> None:
    with pytest.raises(ValueError, match="'greeter'") as caught:
        templates.update("greeter", text)
    assert fragment in str(caught.value) or "Single" in str(caught.value)
    assert templates.history("greeter") == []


@pytest.mark.parametrize("bad", ["", "a\nb", "x" * 201])
def test_a_bad_id_is_refused(templates: PromptTemplates, bad: str) -> None:
    with pytest.raises(ValueError, match="invalid template id"):
        templates.update(bad, "text")
    with pytest.raises(ValueError, match="invalid template id"):
        Template(bad)


def test_a_text_or_parameter_of_the_wrong_type_is_refused(templates: PromptTemplates) -> None:
    with pytest.raises(TypeError, match="text must be a str"):
        templates.update("greeter", 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="parameter 'flag'"):
        Template("greeter", flag=True)
    with pytest.raises(TypeError, match="invalid template id"):
        templates.get(3)  # type: ignore[arg-type]


def test_subscribers_get_every_change_in_order(templates: PromptTemplates) -> None:
    with templates.subscribe("greeter") as one, templates.subscribe() as every:
        templates.init("greeter", "v1")
        templates.update("other", "o1")
        templates.update("greeter", "v2")
        templates.delete("greeter")
        assert [(c.version, c.text) for c in _drain(one)] == [(1, "v1"), (2, "v2"), (3, None)]
        assert [(c.template_id, c.version) for c in _drain(every)] == [
            ("greeter", 1),
            ("other", 1),
            ("greeter", 2),
            ("greeter", 3),
        ]


def test_a_closed_subscription_gets_nothing_more(templates: PromptTemplates) -> None:
    sub = templates.subscribe()
    sub.close()
    templates.update("greeter", "v1")
    assert sub.poll(timeout=0) is None


def test_a_reader_that_falls_behind_is_told(templates: PromptTemplates) -> None:
    sub = templates.subscribe(max_queue=1)
    templates.update("greeter", "v1")
    templates.update("greeter", "v2")  # overflows: the writer does not wait
    assert sub.poll(timeout=0) is not None
    with pytest.raises(StreamOverflow):
        sub.poll(timeout=0)


def test_concurrent_updates_through_one_object_lose_no_version(
    templates: PromptTemplates,
) -> None:
    def writer(n: int) -> None:
        for i in range(10):
            templates.update("shared", f"{n}-{i}")

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert [v.version for v in templates.history("shared")] == list(range(1, 41))


def test_templates_survive_reopening_the_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    with SessionMemory(SqliteStore(path)) as memory:
        PromptTemplates.of(memory).update("greeter", "v1")
        PromptTemplates.of(memory).update("greeter", "v2")
    with SessionMemory(SqliteStore(path)) as memory:
        templates = PromptTemplates.of(memory)
        assert templates.get("greeter") == "v2"
        assert [v.text for v in templates.history("greeter")] == ["v1", "v2"]


def test_of_returns_one_object_per_memory(memory: SessionMemory) -> None:
    assert PromptTemplates.of(memory) is PromptTemplates.of(memory)


def _drain(sub: TemplateSubscription) -> list[TemplateVersion]:
    """The changes queued now."""
    out = []
    while (change := sub.poll(timeout=0)) is not None:
        out.append(change)
    return out


def test_an_update_through_another_memory_on_the_same_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    with SessionMemory(SqliteStore(path)) as one, SessionMemory(SqliteStore(path)) as two:
        PromptTemplates.of(one).update("greeter", "v1")
        assert PromptTemplates.of(two).render(Template("greeter")) == "v1"
        PromptTemplates.of(two).update("greeter", "v2")
        assert PromptTemplates.of(one).get("greeter") == "v2"
        assert [v.version for v in PromptTemplates.of(one).history("greeter")] == [1, 2]
