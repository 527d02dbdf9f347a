"""AgentKey: the `(session, role, index)` identity of an agent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeGuard


class AgentKey(NamedTuple):
    """The identity of an agent in a runtime: `(session, role, index)`.

    A plain `(session, role, index)` tuple is accepted wherever an AgentKey is; use
    `AgentKey.of(value)` to validate and convert one.
    """

    session: str
    role: str
    index: int  # type: ignore[assignment]  # shadows tuple.index, as the contract names it

    @classmethod
    def of(cls, value: Any) -> AgentKey:
        """Validate `value` and return it as an AgentKey.

        Raises:
            ValueError: `value` is not a 3-tuple of a non-empty session string, a non-empty
                role string and a non-negative int index; the message names the bad part.
        """
        if _checked_before(value):
            return value  # every event of an agent carries its key
        if isinstance(value, AgentKey):
            parts: tuple[Any, ...] = tuple(value)
        elif isinstance(value, tuple | list) and len(value) == 3:
            parts = tuple(value)
        else:
            raise ValueError(
                f"invalid agent key {value!r} (expected a (session, role, index) tuple)"
            )
        session, role, index = parts
        if not isinstance(session, str) or not session:
            raise ValueError(f"invalid agent key session {session!r} (expected a non-empty str)")
        if not isinstance(role, str) or not role:
            raise ValueError(f"invalid agent key role {role!r} (expected a non-empty str)")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ValueError(f"invalid agent key index {index!r} (expected an int >= 0)")
        key = value if isinstance(value, AgentKey) else cls(session, role, index)
        if len(_VALID) >= _VALID_MAX:
            _VALID.clear()
        _VALID[key] = None
        return key


# Keys that passed `AgentKey.of` (equal tuples of str, str, int are equally valid), bounded.
_VALID: dict[AgentKey, None] = {}
_VALID_MAX = 4096


def _checked_before(value: Any) -> TypeGuard[AgentKey]:
    """Whether `value` is an AgentKey equal to one that passed `AgentKey.of` (its parts'
    classes looked at first: a key holding something unhashable is not looked up)."""
    return (
        value.__class__ is AgentKey
        and value[0].__class__ is str
        and value[1].__class__ is str
        and value[2].__class__ is int
        and value in _VALID
    )


def validated_key(value: Any, handler: Callable[[Any], Any]) -> AgentKey:
    """The validator of a pydantic field holding an AgentKey
    (`Annotated[AgentKey, WrapValidator(validated_key)]`): a key that passed `AgentKey.of`
    before is taken as it is, anything else is validated as the tuple, then by
    `AgentKey.of`. The field's schema and serialisation are the tuple's."""
    if _checked_before(value):
        return value
    return AgentKey.of(handler(value))
