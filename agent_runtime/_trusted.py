"""Building pydantic models from values that were validated where they entered the runtime.

The hot path (a run's start, each model call) assembles models from parts that are already
models or checked values; validating them again would cost time in proportion to the history.
`model_construct` skips validation but does generic work that costs more than validating a
small model, so this does only what an instance needs.
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
    instance = cls.__new__(cls)
    object.__setattr__(instance, "__dict__", {name: fields[name] for name in names})
    object.__setattr__(instance, "__pydantic_fields_set__", set(names))
    object.__setattr__(instance, "__pydantic_extra__", None)
    private = _private_defaults(cls)
    object.__setattr__(instance, "__pydantic_private__", None if private is None else dict(private))
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
