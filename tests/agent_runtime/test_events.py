"""Event models: JSON round trip of every event type, discrimination, identity and terminals."""

from __future__ import annotations

import re
import typing
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from agent_runtime._key import AgentKey
from agent_runtime.events import (
    TERMINAL_TYPES,
    AgentEnd,
    AgentStart,
    Canceled,
    CustomEvent,
    Error,
    Event,
    EventAdapter,
    EventsDropped,
    MessageStart,
    TurnStart,
    is_terminal,
)
from agent_runtime.messages import UserMessage
from tests.agent_runtime.strategies import EVENT_STRATEGIES, events

EVENT_CLASSES: tuple[type[Any], ...] = typing.get_args(typing.get_args(Event)[0])


def test_the_strategies_cover_every_event_type() -> None:
    assert set(EVENT_STRATEGIES) == set(EVENT_CLASSES)


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda c: c.__name__)
@given(data=st.data())
def test_every_event_type_round_trips_through_json(cls: type[Any], data: st.DataObject) -> None:
    event = data.draw(EVENT_STRATEGIES[cls])
    again = EventAdapter.validate_json(EventAdapter.dump_json(event))
    assert again == event
    assert type(again) is cls
    assert again.agent is None or type(again.agent) is AgentKey


@given(events)
def test_an_event_round_trips_through_its_own_class(event: Any) -> None:
    assert type(event).model_validate_json(event.model_dump_json()) == event


def test_type_literals_are_unique_snake_case_names() -> None:
    names = [cls.model_fields["type"].default for cls in EVENT_CLASSES]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", n) for n in names)


def test_events_are_discriminated_by_type() -> None:
    parsed = EventAdapter.validate_python({"type": "canceled", "reason": "user_abort", "seq": 3})
    assert parsed == Canceled(reason="user_abort", seq=3, ts=parsed.ts)


def test_an_unknown_event_type_is_rejected() -> None:
    with pytest.raises(ValidationError):
        EventAdapter.validate_python({"type": "agent_paused"})


def test_agent_is_an_agent_key_also_when_given_a_plain_tuple() -> None:
    event = AgentStart(agent=("s1", "research", 0))
    assert type(event.agent) is AgentKey
    assert event.agent == AgentKey("s1", "research", 0)


def test_an_invalid_agent_key_is_rejected() -> None:
    with pytest.raises(ValidationError, match="session"):
        AgentStart(agent=("", "research", 0))


@pytest.mark.parametrize(
    "key",
    [
        AgentKey(["s1"], "research", 0),  # type: ignore[arg-type]  # unhashable: not looked up
        AgentKey("s1", "", 0),
        AgentKey("s1", "research", -1),
    ],
)
def test_an_agent_key_instance_with_bad_parts_is_rejected_by_validation(key: AgentKey) -> None:
    with pytest.raises(ValidationError):
        AgentStart(agent=key)


@pytest.mark.parametrize(
    "key",
    [
        AgentKey(["s1"], "research", 0),  # type: ignore[arg-type]
        AgentKey("s1", "research", "0"),  # type: ignore[arg-type]  # no coercion here
        AgentKey("s1", "research", True),
    ],
)
def test_agent_key_of_names_a_bad_part_of_an_agent_key_instance(key: AgentKey) -> None:
    with pytest.raises(ValueError, match="invalid agent key"):
        AgentKey.of(key)


def test_a_valid_agent_key_is_kept_as_the_same_object() -> None:
    key = AgentKey.of(("s1", "research", 0))
    assert AgentStart(agent=key).agent is key
    assert MessageStart(agent=key, message=UserMessage(content="hi")).agent is key


def test_identity_defaults() -> None:
    event = TurnStart()
    assert (event.agent, event.run_id, event.seq) == (None, "", 0)
    assert event.ts > 0


def test_events_are_frozen() -> None:
    event = EventsDropped(count=2)
    with pytest.raises(ValidationError):
        event.count = 3  # type: ignore[misc]


def test_message_events_carry_any_message() -> None:
    event = MessageStart(message=UserMessage(content="hi"))
    again = EventAdapter.validate_json(event.model_dump_json())
    assert isinstance(again, MessageStart)
    assert isinstance(again.message, UserMessage)


def test_terminals_are_agent_end_error_and_canceled() -> None:
    assert set(TERMINAL_TYPES) == {AgentEnd, Error, Canceled}
    assert is_terminal(AgentEnd())
    assert is_terminal(Error(reason="boom"))
    assert is_terminal(Canceled(reason="timeout"))
    assert not any(
        is_terminal(c.model_construct()) for c in EVENT_CLASSES if c not in TERMINAL_TYPES
    )


# -- custom events ------------------------------------------------------------------------------


def test_custom_events_are_public_and_part_of_the_event_union() -> None:
    import agent_runtime

    assert agent_runtime.CustomEvent is CustomEvent
    event = CustomEvent(name="progress", data={"done": [1, 2], "of": 3.5, "ok": True}, seq=4)
    assert event.type == "custom"
    assert EventAdapter.validate_json(event.model_dump_json()) == event


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"name": "", "data": 1}, "name"),
        ({"name": 3, "data": 1}, "name"),
        ({"name": "x", "data": {1, 2}}, "data"),
        ({"name": "x", "data": object()}, "data"),
        ({"name": "x", "data": [1.0, float("inf")]}, "JSON cannot represent"),
        ({"name": "x", "data": {"a": float("nan")}}, "JSON cannot represent"),
    ],
)
def test_a_custom_event_needs_a_name_and_json_data(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(ValidationError, match=named):
        CustomEvent(**fields)


class _LateEnd(AgentEnd):
    """A subclass of a terminal class: still a terminal."""


class _Marker(TurnStart):
    """A subclass of another event class: not a terminal."""


@given(event=events)
def test_is_terminal_says_what_isinstance_of_the_terminal_types_says(event: Any) -> None:
    assert is_terminal(event) is isinstance(event, TERMINAL_TYPES)


def test_is_terminal_holds_for_subclasses_and_anything_else() -> None:
    assert is_terminal(_LateEnd()) is True
    assert is_terminal(_Marker()) is False
    assert is_terminal("agent_end") is False and is_terminal(None) is False
