"""A tool's argument model built from a function's signature and docstring (used by `tools`)."""

from __future__ import annotations

import functools
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, create_model

from agent_runtime._errors import AgentRuntimeError

_CONFIG = ConfigDict(extra="ignore", coerce_numbers_to_str=True)
"""Lax validation ("42" -> 42, "true" -> True, 42 -> "42"); unknown arguments are ignored."""


class ToolDefinitionError(AgentRuntimeError, ValueError):
    """A tool cannot be defined or registered as given; the message names the tool and the fault.

    Attributes:
        name: the tool (or function) name concerned, when known.
    """

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


@dataclass(frozen=True)
class _Param:
    name: str
    field: str | None  # the model field holding it; None for an injected ToolContext
    positional: bool  # positional-only: must be passed by position


@dataclass(frozen=True)
class FunctionSchema:
    """What `from_function` learns from a function: its argument model, schema and description."""

    model: type[BaseModel]
    params: tuple[_Param, ...]
    parameters: dict[str, Any]
    description: str

    def call_args(
        self, values: Mapping[str, Any], context: Any
    ) -> tuple[list[Any], dict[str, Any]]:
        """`(args, kwargs)` for the function: validated `values` by name, `context` injected."""
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for param in self.params:
            value = context if param.field is None else values[param.name]
            if param.positional:
                args.append(value)
            else:
                kwargs[param.name] = value
        return args, kwargs


def build_function_schema(
    fn: Callable[..., Any],
    tool_name: str,
    *,
    context_type: type,
    localns: Mapping[str, Any] | None = None,
    description: str | None = None,
) -> FunctionSchema:
    """Build the argument model of `fn` (its parameters except those annotated `context_type`).

    Raises:
        ToolDefinitionError: `fn` has `*args`/`**kwargs`, hints that cannot be resolved, or a
            parameter type pydantic cannot validate or describe as JSON schema.
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"tool {tool_name!r}: no inspectable signature ({exc})") from exc
    try:
        hints = typing.get_type_hints(
            _hint_source(fn), localns=dict(localns or {}), include_extras=True
        )
    except Exception as exc:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: cannot resolve the type hints of {fn!r} ({exc})", tool_name
        ) from exc

    summary, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
    fields: dict[str, Any] = {}
    params: list[_Param] = []
    for index, p in enumerate(signature.parameters.values()):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            star = "*" if p.kind is p.VAR_POSITIONAL else "**"
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {star}{p.name} is not supported "
                "(a tool takes named parameters)",
                tool_name,
            )
        annotation = hints.get(p.name, Any)
        positional = p.kind is p.POSITIONAL_ONLY
        if _is_context(annotation, context_type):
            params.append(_Param(p.name, None, positional))
            continue
        # Internal field names with the parameter name as alias: a parameter may then be called
        # `schema`, `json` or `model_x` without clashing with BaseModel's own attributes.
        field = f"p{index}"
        default = ... if p.default is p.empty else p.default
        fields[field] = (Annotated[annotation, Field(alias=p.name)], default)
        params.append(_Param(p.name, field, positional))

    try:
        model = create_model(f"{tool_name}_arguments", __config__=_CONFIG, **fields)
        schema = model.model_json_schema()
    except (PydanticUserError, TypeError, ValueError) as exc:
        raise ToolDefinitionError(
            f"tool {tool_name!r}: cannot build an argument schema for {fn!r} ({exc})", tool_name
        ) from exc
    return FunctionSchema(
        model=model,
        params=tuple(params),
        parameters=_clean_schema(schema, arg_docs),
        description=summary if description is None else description,
    )


def _hint_source(fn: Callable[..., Any]) -> Any:
    """What holds the annotations of `fn`: the function itself, the function a partial wraps,
    or the `__call__` of a callable object."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isbuiltin(fn):
        return fn
    return type(fn).__call__


def model_parameters(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a pydantic argument model, cleaned the same way as a function's."""
    return _clean_schema(model.model_json_schema(), {})


def _is_context(annotation: Any, context_type: type) -> bool:
    if annotation is context_type:
        return True
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _is_context(typing.get_args(annotation)[0], context_type)
    if origin is typing.Union or origin is types.UnionType:
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return len(members) == 1 and _is_context(members[0], context_type)
    return False


def _clean_schema(schema: dict[str, Any], arg_docs: Mapping[str, str]) -> dict[str, Any]:
    """Drop pydantic's generated titles; add docstring descriptions where a field has none."""
    schema = dict(schema)
    schema.pop("title", None)
    properties: dict[str, Any] = {}
    for name, prop in schema.get("properties", {}).items():
        prop = {k: v for k, v in prop.items() if k != "title"}
        if "description" not in prop and name in arg_docs:
            prop["description"] = arg_docs[name]
        properties[name] = prop
    schema["type"] = "object"
    schema["properties"] = properties
    return schema


# ---------------------------------------------------------------------------------------------
# Docstrings

_ARGS_HEADERS = {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
_OTHER_HEADERS = {
    "returns", "return", "yields", "yield", "raises", "raise", "example", "examples", "note",
    "notes", "attributes", "see also", "warning", "warnings", "todo", "references",
}  # fmt: skip
_HEADER = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """`(summary, {parameter: description})` from a cleaned docstring.

    The summary is the first paragraph, its lines joined by spaces (it ends at a blank line or
    at a section header). Parameter descriptions come from a Google-style `Args:` section
    (continuation lines joined) or Sphinx-style `:param name: text` lines.
    """
    lines = doc.splitlines()
    summary: list[str] = []
    for line in lines:
        stripped = line.strip()
        if not stripped or _is_header(stripped) or stripped.startswith(":"):
            break
        summary.append(stripped)

    docs: dict[str, str] = {}
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        sphinx = _SPHINX_PARAM.match(stripped)
        if sphinx:
            docs[sphinx.group(1)] = sphinx.group(2).strip()
        header = _HEADER.match(stripped)
        if header and header.group(1).strip().lower() in _ARGS_HEADERS:
            i = _parse_args_section(lines, i, docs)
            continue
        i += 1
    return " ".join(summary), docs


def _is_header(stripped: str) -> bool:
    header = _HEADER.match(stripped)
    if header is None:
        return False
    return header.group(1).strip().lower() in _ARGS_HEADERS | _OTHER_HEADERS


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _parse_args_section(lines: list[str], start: int, docs: dict[str, str]) -> int:
    """Parse the entries after the header at `start`; return the index after the section."""
    header_indent = _indent(lines[start])
    entry_indent: int | None = None
    current: str | None = None
    i = start + 1
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        indent = _indent(line)
        if indent <= header_indent:
            break
        if entry_indent is None:
            entry_indent = indent
        match = _ENTRY.match(line.strip())
        if indent <= entry_indent and match:
            current = match.group(1)
            docs[current] = match.group(2).strip()
        elif current is not None:
            docs[current] = f"{docs[current]} {line.strip()}".strip()
        i += 1
    return i
