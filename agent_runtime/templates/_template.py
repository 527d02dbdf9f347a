"""Template: a reference to a stored prompt template and its parameters, and how it renders."""

from __future__ import annotations

import string
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from agent_runtime.templates._errors import TemplateParameterMissing

MAX_ID_LENGTH = 200
_FORMATTER = string.Formatter()


class Template:
    """`Template("activity-agent", city="Oslo")`: the prompt template stored under that id,
    with `{city}` replaced by "Oslo" when it is rendered.

    Given as an agent's `system_prompt`, it is looked up in `runtime.templates` at the start
    of each run, so a template updated meanwhile applies from the next run on, without
    restarting the agent. Immutable and hashable; parameters are strs (ints and floats are
    turned into their str). A parameter the text has no placeholder for is ignored, so a
    template may drop a placeholder without breaking the agents that pass it.

    Raises:
        TypeError, ValueError: an invalid id (see `check_template_id`) or a parameter value
            that is not a str, int or float.
    """

    __slots__ = ("_params", "id")

    id: str
    _params: Mapping[str, str]

    def __init__(self, template_id: str, /, **params: str | int | float) -> None:
        object.__setattr__(self, "id", check_template_id(template_id))
        values: dict[str, str] = {}
        for name, value in params.items():
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise TypeError(
                    f"template {template_id!r}: parameter {name!r} must be a str, int or "
                    f"float, not {type(value).__name__}"
                )
            values[name] = str(value)
        object.__setattr__(self, "_params", MappingProxyType(values))

    @property
    def params(self) -> Mapping[str, str]:
        """The parameters, read-only."""
        return self._params

    def render(self, text: str) -> str:
        """`text` (this template's stored text) with its placeholders filled.

        Raises:
            TemplateParameterMissing: a placeholder has no parameter (it names both).
        """
        return render(self.id, text, self._params)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Template is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Template):
            return NotImplemented
        return self.id == other.id and dict(self._params) == dict(other._params)

    def __hash__(self) -> int:
        return hash((self.id, frozenset(self._params.items())))

    def __repr__(self) -> str:
        params = "".join(f", {k}={v!r}" for k, v in self._params.items())
        return f"Template({self.id!r}{params})"


def check_template_id(template_id: Any) -> str:
    """`template_id` if it is a valid id: a non-empty str of at most 200 characters, with no
    control characters.

    Raises:
        TypeError: it is not a str.
        ValueError: it is empty, too long or holds a control character.
    """
    if not isinstance(template_id, str):
        raise TypeError(f"invalid template id {template_id!r} (expected a non-empty str)")
    if not template_id or len(template_id) > MAX_ID_LENGTH:
        raise ValueError(
            f"invalid template id {template_id!r} (expected 1 to {MAX_ID_LENGTH} characters)"
        )
    if any(not ch.isprintable() for ch in template_id):
        raise ValueError(f"invalid template id {template_id!r} (it holds a control character)")
    return template_id


def placeholders(template_id: str, text: Any) -> list[str]:
    """The names of the `{name}` placeholders of `text`, in order (`{{` and `}}` are literal
    braces).

    Raises:
        TypeError: `text` is not a str.
        ValueError: a placeholder is not a plain name (`{0}`, `{a.b}`, `{a!r}`, `{a:>5}`) or a
            brace is unmatched; the message names the template and the placeholder.
    """
    if not isinstance(text, str):
        raise TypeError(
            f"prompt template {template_id!r}: the text must be a str, not {type(text).__name__}"
        )
    try:
        fields = list(_FORMATTER.parse(text))
    except ValueError as exc:
        raise ValueError(
            f"prompt template {template_id!r}: {exc} (write {{{{ and }}}} for literal braces)"
        ) from None
    names: list[str] = []
    for _literal, name, spec, conversion in fields:
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            shown = name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            raise ValueError(
                f"prompt template {template_id!r}: invalid placeholder {{{shown}}} "
                "(expected {name} with a plain name; write {{ and }} for literal braces)"
            )
        names.append(name)
    return names


def render(template_id: str, text: str, params: Mapping[str, str]) -> str:
    """`text` with each `{name}` replaced by `params[name]`.

    Raises:
        TemplateParameterMissing: a placeholder has no value in `params`.
        ValueError: `text` is not a valid template (see `placeholders`).
    """
    out: list[str] = []
    for literal, name, _spec, _conversion in _FORMATTER.parse(text):
        out.append(literal)
        if name is None:
            continue
        if name not in params:
            placeholders(template_id, text)  # a malformed placeholder is reported as such
            raise TemplateParameterMissing(template_id, name)
        out.append(params[name])
    return "".join(out)
