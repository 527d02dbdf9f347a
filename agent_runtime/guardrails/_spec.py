"""Guardrails named in config: `"module:Class"` resolved to a Guardrail subclass."""

from __future__ import annotations

import importlib
import re

from agent_runtime.guardrails._base import Guardrail, validated

_SPEC = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def load_class(spec: str) -> type[Guardrail]:
    """The Guardrail subclass `spec` (`"package.module:Class"`) names, imported.

    Raises:
        ValueError: `spec` is not of that form, its module cannot be imported, it has no such
            attribute, or the attribute is not a Guardrail subclass; the message names `spec`.
    """
    if not isinstance(spec, str) or not _SPEC.fullmatch(spec):
        raise ValueError(
            f"guardrail {spec!r} is not of the form 'module:Class' (e.g. 'myapp.guards:NoSecrets')"
        )
    module_name, _, qualname = spec.partition(":")
    try:
        found: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"guardrail {spec!r}: module {module_name!r} cannot be imported ({exc})"
        ) from None
    for part in qualname.split("."):
        if not hasattr(found, part):
            raise ValueError(f"guardrail {spec!r}: module {module_name!r} has no {qualname!r}")
        found = getattr(found, part)
    if not (isinstance(found, type) and issubclass(found, Guardrail)):
        raise ValueError(
            f"guardrail {spec!r} is not a subclass of agent_runtime.Guardrail "
            f"(it is {type(found).__name__})"
        )
    return found


def instantiate(spec: str) -> Guardrail:
    """An instance of the class `spec` names, created with no arguments, checked.

    Raises:
        ValueError: as `load_class`, or the instance's `at` / `mode` is invalid.
        TypeError: the class cannot be created without arguments (named).
    """
    cls = load_class(spec)
    try:
        guardrail = cls()
    except TypeError as exc:
        raise TypeError(f"guardrail {spec!r} cannot be created without arguments: {exc}") from exc
    return validated(guardrail)
