"""state_json: a workflow's state as the JSON dict its record stores, refused (naming the field)
when it is not JSON: a value pydantic cannot serialize, NaN or an infinity, or a dump that the
state model would not read back."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from agent_runtime.workflows._errors import InvalidState


def state_json(state: BaseModel, *, where: str) -> dict[str, Any]:
    """`state` dumped to JSON values (`model_dump(mode="json")`), which its model validates
    again, so that a record written now can be resumed later.

    Raises:
        InvalidState: a field holds a value that is not JSON (an object pydantic cannot
            serialize, a value of the wrong type, NaN or an infinity) or does not read back;
            the message starts with `where` and names the field (and the path in it).
    """
    try:
        python = state.model_dump(mode="python", warnings="none")
    except PydanticSerializationError as exc:
        raise _refused(where, _failing_field(state), exc) from None
    for name, value in python.items():
        problem = _non_finite(value, name)
        if problem is not None:
            raise InvalidState(f"{where}: the state is not JSON: {problem}")
    try:
        dumped = state.model_dump(mode="json", warnings="error")
    except PydanticSerializationError as exc:
        raise _refused(where, _failing_field(state), exc) from None
    try:
        type(state).model_validate(dumped)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(the whole state)"
        raise InvalidState(
            f"{where}: the state does not read back from JSON: field {field!r}: {first['msg']}"
        ) from None
    return dumped


def _refused(where: str, field: str | None, exc: Exception) -> InvalidState:
    detail = " ".join(str(exc).split())
    named = f"field {field!r}" if field is not None else "a field"
    return InvalidState(f"{where}: the state is not JSON: {named}: {detail}")


def _failing_field(state: BaseModel) -> str | None:
    """The first field of `state` that pydantic cannot dump to JSON on its own."""
    for name in type(state).model_fields:
        try:
            state.model_dump(mode="json", include={name}, warnings="error")
        except PydanticSerializationError:
            return name
    return None


def _non_finite(value: Any, at: str) -> str | None:
    """Where in `value` (found at path `at`) a NaN or an infinity is, or None."""
    if isinstance(value, float):
        return (
            None if math.isfinite(value) else f"field {at!r} holds {value!r}, not a finite number"
        )
    if isinstance(value, dict):
        for key, item in value.items():
            problem = _non_finite(item, f"{at}[{key!r}]")
            if problem is not None:
                return problem
    elif isinstance(value, list | tuple | set | frozenset):
        for index, item in enumerate(value):
            problem = _non_finite(item, f"{at}[{index}]")
            if problem is not None:
                return problem
    return None
