"""Tool-argument validation: lax pydantic coercion, JSON strings decoded, model-readable errors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pydantic_core
from pydantic import BaseModel, ValidationError

from agent_runtime._errors import AgentRuntimeError

_MAX_DECODE_ROUNDS = 4
_RECEIVED_CHARS = 80

# Error types meaning "a container was expected": a string in that place may be JSON text.
_CONTAINER_ERRORS = frozenset(
    {
        "list_type",
        "tuple_type",
        "set_type",
        "frozen_set_type",
        "dict_type",
        "mapping_type",
        "iterable_type",
        "model_type",
        "model_attributes_type",
        "dataclass_type",
        "dataclass_exact_type",
    }
)

_JSON_TYPE_NAMES = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
    list: "array",
    tuple: "array",
    dict: "object",
}


class ToolArgumentsError(AgentRuntimeError, ValueError):
    """A tool call's arguments are invalid; the tool did not run.

    Attributes:
        errors: one dict per bad field, JSON-able: `field` (dotted path, `"(arguments)"` for
            the whole object), `message`, `expected` (a type description or None), `received`
            (a short rendering of the value) and `type` (pydantic's error type, if any).
        ignored: names of unknown arguments that were ignored.
    """

    def __init__(self, errors: Iterable[Mapping[str, Any]], ignored: Iterable[str] = ()) -> None:
        self.errors = [dict(e) for e in errors]
        self.ignored = list(ignored)
        super().__init__("; ".join(f"{e['field']}: {e['message']}" for e in self.errors))

    def describe(self, tool_name: str) -> str:
        """The model-readable message: every bad field with what was expected and received."""
        lines = [f"Invalid arguments for tool {tool_name}; the tool did not run."]
        for e in self.errors:
            expected = f"expected {e['expected']}" if e.get("expected") else ""
            if e.get("type") == "missing":
                lines.append(f"- {e['field']}: missing" + (f"; {expected}" if expected else ""))
            else:
                got = f"received {e['received']}"
                lines.append(
                    f"- {e['field']}: {e['message']}; {expected + ', ' if expected else ''}{got}"
                )
        if self.ignored:
            lines.append(f"Unknown arguments (ignored): {', '.join(self.ignored)}")
        lines.append("Fix the arguments and call the tool again.")
        return "\n".join(lines)


class ModelValidator:
    """Validates tool arguments with a pydantic model; returns `{argument name: value}`.

    Coercion is pydantic's lax mode (the model's config decides the details); a string found
    where an object or array is expected is decoded as JSON and validation retried; unknown
    arguments are left to the model's `extra` setting and reported by `ignored`. Values are
    taken shallowly from the validated model (nested models stay models).
    """

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model
        self._keys = {(info.alias or name): name for name, info in model.model_fields.items()}
        self._accepted = set(self._keys)
        for info in model.model_fields.values():
            if isinstance(info.validation_alias, str):
                self._accepted.add(info.validation_alias)
        try:
            schema = model.model_json_schema()
        except Exception:  # a schema is only used to word errors
            schema = {}
        self._properties: dict[str, Any] = schema.get("properties", {})

    def ignored(self, arguments: Mapping[str, Any]) -> list[str]:
        """The argument names the model does not know, sorted."""
        return sorted(str(k) for k in arguments if k not in self._accepted)

    def __call__(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate and coerce.

        Raises:
            ToolArgumentsError: naming every bad field; `ignored` lists unknown arguments.
        """
        data: Any = dict(arguments)
        for _ in range(_MAX_DECODE_ROUNDS + 1):
            try:
                instance = self.model.model_validate(data)
            except ValidationError as exc:
                decoded = _decode_json_strings(data, exc.errors())
                if decoded is None:
                    errors = [error_entry(e, self._properties) for e in exc.errors()]
                    raise ToolArgumentsError(errors, self.ignored(arguments)) from None
                data = decoded
                continue
            return {key: getattr(instance, name) for key, name in self._keys.items()}
        raise AssertionError("unreachable")  # pragma: no cover


def error_entry(error: Any, properties: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One `ToolArgumentsError.errors` entry from a pydantic error dict.

    `properties` (the argument schema's) words what a top-level field expected.
    """
    loc = tuple(error.get("loc", ()))
    kind = error.get("type")
    prop = (properties or {}).get(str(loc[0])) if len(loc) == 1 else None
    return {
        "field": ".".join(str(p) for p in loc) or "(arguments)",
        "message": error.get("msg", "invalid value"),
        "expected": describe_schema(prop) if prop is not None else None,
        "received": "nothing" if kind == "missing" else render(error.get("input")),
        "type": kind,
    }


def arguments_from_raw(arguments: dict[str, Any], raw: str | None) -> dict[str, Any]:
    """The arguments of a tool call, recovering a double-encoded object from `raw` if needed.

    `raw` is set by the LLM layer when the streamed arguments were not a complete JSON object.

    Raises:
        ToolArgumentsError: `raw` is not (a JSON string holding) a JSON object.
    """
    if raw is None:
        return arguments
    value: Any = raw
    for _ in range(2):
        try:
            value = pydantic_core.from_json(value)
        except ValueError:
            break
        if not isinstance(value, str):
            break
    if isinstance(value, dict):
        return value
    error = {
        "field": "(arguments)",
        "message": "the arguments are not a complete JSON object",
        "expected": "a JSON object",
        "received": render(raw),
        "type": "json_invalid",
    }
    raise ToolArgumentsError([error])


def describe_schema(schema: Mapping[str, Any]) -> str:
    """A short English rendering of a JSON-schema type: `integer`, `array of string`, ..."""
    if "enum" in schema:
        return "one of " + ", ".join(render_json(v) for v in schema["enum"])
    if "const" in schema:
        return render_json(schema["const"])
    if "$ref" in schema:
        return f"object ({str(schema['$ref']).rsplit('/', 1)[-1]})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(describe_schema(s) for s in schema[key])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        return f"array of {describe_schema(schema['items'])}"
    if isinstance(kind, str):
        return kind
    return "any value"


def render(value: Any) -> str:
    """A short rendering of a received value with its JSON type: `'abc' (string)`."""
    kind = _JSON_TYPE_NAMES.get(type(value), type(value).__name__)
    return f"{render_json(value)} ({kind})"


def render_json(value: Any) -> str:
    """`value` as compact JSON (repr for what JSON cannot hold), cut to a readable length."""
    text = pydantic_core.to_json(value, fallback=repr).decode()
    if len(text) > _RECEIVED_CHARS:
        text = text[: _RECEIVED_CHARS - 1] + "…"
    return text


def _decode_json_strings(data: Any, errors: list[Any]) -> Any:
    """`data` with each string that stands where a container was expected decoded as JSON.

    Returns None when nothing could be decoded (validation cannot improve).
    """
    changed = False
    for error in errors:
        if error.get("type") not in _CONTAINER_ERRORS:
            continue
        path = _string_path(data, tuple(error.get("loc", ())))
        if not path:
            continue
        try:
            value = pydantic_core.from_json(_get(data, path))
        except ValueError:
            continue
        if isinstance(value, dict | list):
            data = _set(data, path, value)
            changed = True
    return data if changed else None


def _string_path(data: Any, loc: tuple[Any, ...]) -> list[Any] | None:
    """Follow `loc` into `data`; the path to the string where it stops, if it stops at one."""
    current, path = data, []
    for part in loc:
        in_dict = isinstance(current, dict) and part in current
        in_list = isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        if not (in_dict or in_list):
            break
        current = current[part]
        path.append(part)
    return path if isinstance(current, str) else None


def _get(data: Any, path: list[Any]) -> Any:
    for part in path:
        data = data[part]
    return data


def _set(data: Any, path: list[Any], value: Any) -> Any:
    """A copy of `data` with `value` at `path` (containers along the path copied, not mutated)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    copy: Any = dict(data) if isinstance(data, dict) else list(data)
    copy[head] = _set(data[head], rest, value)
    return copy
