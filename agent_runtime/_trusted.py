"""Building pydantic models from values that were validated where they entered the runtime.

The hot path (a run's start, each model call) assembles models from parts that are already
models or checked values; validating them again would cost time in proportion to the history.
`model_construct` skips validation but does generic work that costs more than validating a
small model, so this does only what an instance needs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

M = TypeVar("M", bound=BaseModel)

_PRIVATE_DEFAULTS: dict[type[BaseModel], dict[str, Any] | None] = {}
_FIELD_NAMES: dict[type[BaseModel], tuple[str, ...]] = {}
# Per class, each field: its name, its default (None for a factory or a required field), its
# default factory (None if none), and whether it is required.
_Defaults = tuple[tuple[str, Any, Callable[[], Any] | None, bool], ...]
_DEFAULTS: dict[type[BaseModel], _Defaults] = {}


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


def completed(cls: type[M], fields: dict[str, Any]) -> M:
    """`cls(**fields)` without validating: the fields left out take their defaults (a
    default factory is called), and only those given count as set, as after validation. A
    list is copied, as validation copies it. Each value must be of its field's type already,
    and `cls` must have no validator that changes values.

    Raises:
        TypeError: `fields` names a field `cls` does not have, or leaves out a required one;
            `cls` has private attributes, an alias, a mutable default or a default factory
            that takes the data (validate those).
    """
    values: dict[str, Any] = {}
    given = 0
    for name, default, factory, required in _defaults(cls):
        if name in fields:
            value = fields[name]
            values[name] = list(value) if value.__class__ is list else value
            given += 1
        elif required:
            raise TypeError(f"{cls.__name__} needs {name!r}")
        else:
            values[name] = default if factory is None else factory()
    if given != len(fields):
        unknown = sorted(set(fields) - set(values))
        raise TypeError(f"{cls.__name__} has no field {', '.join(map(repr, unknown))}")
    return filled(cls, values, set(fields), None)


def _defaults(cls: type[BaseModel]) -> _Defaults:
    spec = _DEFAULTS.get(cls)
    if spec is None:
        spec = _DEFAULTS[cls] = _defaults_of(cls)
    return spec


def _defaults_of(cls: type[BaseModel]) -> _Defaults:
    if cls.__private_attributes__:
        raise TypeError(f"{cls.__name__} has private attributes: validate it")
    fields = []
    for name, info in cls.model_fields.items():
        if info.default_factory_takes_validated_data or info.alias not in (None, name):
            raise TypeError(f"{cls.__name__}.{name} has an alias or a data-taking factory")
        factory = cast("Callable[[], Any] | None", info.default_factory)
        default = None if info.default is PydanticUndefined else info.default
        if isinstance(default, list | dict | set):  # validation would copy it per instance
            raise TypeError(f"{cls.__name__}.{name} has a mutable default")
        fields.append((name, default, factory, info.is_required()))
    return tuple(fields)
