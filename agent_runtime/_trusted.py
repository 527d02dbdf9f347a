"""Building pydantic models from values that were validated where they entered the runtime.

The hot path (a run's start, each model call) assembles models from parts that are already
models or checked values; validating them again would cost time in proportion to the history.
`model_construct` skips validation but does generic work that costs more than validating a
small model, so this does only what an instance needs.

Kept because `make bench` shows what it buys (issue 34's rule for a trick; measured
2026-12-05 on a 2-core machine, each figure with and without it in one session):
- `trusted(ChatRequest, ...)`, one per model call: "text turn with 3,000 messages" 1.33x the
  empty turn with it, 4.72x when the request is validated (1,779 us against 6,048 us);
- `filled(...)` for the per-token `MessageDelta` and `MessageUpdate` of `events.py`: "1000
  streamed deltas to one subscriber" 104k/s with it, 70k/s validated and with
  `model_construct`; "CPU per streamed delta" 9.2 us against 13.3 us (2026-12-06). Only the
  construction: a deferred update's message is made on first read as `cached_property` makes
  its value, in the instance's dict, with no lock and no swap.
The run's other events are validated as they are made: skipping that bought under 10% on
"one text turn" (1,337-1,387 us either way), so that trick went.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_PRIVATE_DEFAULTS: dict[type[BaseModel], dict[str, Any] | None] = {}
_FIELD_NAMES: dict[type[BaseModel], tuple[str, ...]] = {}


def trusted(cls: type[M], fields: dict[str, Any]) -> M:
    """An instance of `cls` holding the values of `fields` as they are (nothing is checked
    or copied): every field of `cls` must be given, each already of its field's type.

    Raises:
        KeyError: a field of `cls` is missing from `fields`.
    """
    names = _field_names(cls)
    private = _private_defaults(cls)
    values = {name: fields[name] for name in names}
    return filled(cls, values, set(names), None if private is None else dict(private))


# The slots every pydantic model has, set through their descriptors (no lookup by name).
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_new = object.__new__


def filled(
    cls: type[M], values: dict[str, Any], fields_set: set[str], private: dict[str, Any] | None
) -> M:
    """What validation leaves in an instance, put there directly: `values` as its fields
    (none checked or copied), `fields_set` as the fields it counts as set (kept, not copied:
    callers may share one set among frozen instances), `private` as its private attributes."""
    instance = _new(cls)
    _set_dict(instance, values)
    _set_fields_set(instance, fields_set)
    _set_extra(instance, None)
    _set_private(instance, private)
    return instance


def _private_defaults(cls: type[BaseModel]) -> dict[str, Any] | None:
    try:
        return _PRIVATE_DEFAULTS[cls]
    except KeyError:
        attrs = cls.__private_attributes__
        defaults = {name: attr.get_default() for name, attr in attrs.items()} if attrs else None
        _PRIVATE_DEFAULTS[cls] = defaults
        return defaults


def _field_names(cls: type[BaseModel]) -> tuple[str, ...]:
    try:
        return _FIELD_NAMES[cls]
    except KeyError:
        names = _FIELD_NAMES[cls] = tuple(cls.model_fields)  # in the order they serialise
        return names
