"""docs/configuration.md, generated from `RuntimeConfig`: every key, its type, default and
environment variable, with the notes of the shipped config/runtime.toml.

    python -m agent_runtime.cli.config_reference            # print the reference
    python -m agent_runtime.cli.config_reference --write    # rewrite docs/configuration.md
    python -m agent_runtime.cli.config_reference --check    # exit 1 if the file is stale

The tables follow the models, so a new key or section appears once the file is regenerated
(tests/agent_runtime/test_config_reference.py fails until it is). What each section is
for comes from its model's docstring; a key's note from the comment beside (or above) it in
config/runtime.toml, or from the field's `description` where one is set.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from agent_runtime.config import CONFIG_PATH_ENV, ENV_PREFIX, RuntimeConfig

ROOT = Path(__file__).resolve().parents[2]
DOC_PATH = ROOT / "docs" / "configuration.md"
TOML_PATH = ROOT / "config" / "runtime.toml"
COMMAND = "python -m agent_runtime.cli.config_reference --write"

_DESIGN_REF = re.compile(r"\s*\(DESIGN\.md[^)]*\)")
_HEADER = re.compile(r"^#?\s*\[([a-z0-9_.]+)\]\s*(?:#\s*(.*))?$")
_KEY = re.compile(r"^(#\s*)?([a-z_][a-z0-9_]*)\s*=\s*(.*)$")
_CONTINUATION = re.compile(r"^#?\s{10,}#\s?(.*)$")
# A value (a string, a one-line array, or a bare word) and the comment after it, if any.
_VALUE = re.compile(r'^(?P<value>"[^"]*"|\[[^\]]*\]|[^\s#]+)\s*(?:#\s*(?P<note>.*))?$')


@dataclass(frozen=True)
class Row:
    """One key of a table: where it is, what it takes, and what it defaults to."""

    key: str
    type: str
    default: str
    env: str
    note: str


@dataclass(frozen=True)
class Table:
    """One TOML table (`[memory]`, `[llm.profiles.NAME]`, ...) and its keys."""

    path: tuple[str, ...]
    about: str
    rows: list[Row]


# -- the notes of config/runtime.toml ---------------------------------------------------------


def toml_notes(text: str) -> dict[tuple[str, ...], str]:
    """The comment of each key (`("memory", "path")`) and table (`("memory",)`) of a TOML
    file in the shipped file's style: beside the key (continued on indented comment lines
    below), else the comment block right above it. Commented-out keys count."""
    notes: dict[tuple[str, ...], str] = {}
    examples: dict[tuple[str, ...], str] = {}
    table: tuple[str, ...] = ()
    block: list[str] = []
    last: tuple[str, ...] | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        continued = _CONTINUATION.match(line)
        if continued and last is not None and last in notes:
            notes[last] += " " + continued.group(1).strip()
            continue
        stripped = line.strip()
        if not stripped:
            block, last = [], None
            continue
        header = _HEADER.match(stripped)
        if header:
            table = tuple(header.group(1).split("."))
            note = header.group(2) or " ".join(block)
            if note:
                notes[table] = note.strip()
            block, last = [], table
            continue
        key = _KEY.match(stripped)
        if key and (key.group(1) is None or _looks_like_value(key.group(3))):
            parts = _VALUE.match(key.group(3))
            value = parts.group("value") if parts else key.group(3)
            comment = (parts.group("note") if parts else None) or ""
            path = (*table, key.group(2))
            note = comment.strip().lstrip("#").strip() or " ".join(block)
            if note:
                notes[path] = note
            if key.group(1) is not None:  # a commented-out key: its value is an example
                examples[path] = f"`{key.group(2)} = {value.strip()}`"
            block, last = [], path
            continue
        if stripped.startswith("#"):
            block.append(stripped.lstrip("#").strip())
            last = None
    for path, example in examples.items():
        note = notes.get(path, "").rstrip(":")
        notes[path] = f"{note}; e.g. {example}" if note else f"e.g. {example}"
    return notes


def _looks_like_value(text: str) -> bool:
    # A commented key's value is TOML (`100`, `"x"`, `[...]`), not prose.
    return bool(re.match(r'^("|\[|-?\d|true|false)', text.strip()))


# -- the models -------------------------------------------------------------------------------


def tables(notes: dict[tuple[str, ...], str] | None = None) -> list[Table]:
    """Every table of `RuntimeConfig`, in the order of its fields; a `dict[str, Model]` field
    and a section of free names (`[guardrails.ROLE]`) become a table with a placeholder."""
    notes = {} if notes is None else notes
    found: list[Table] = []
    for name, field in RuntimeConfig.model_fields.items():
        model = _model_of(field.annotation)
        assert model is not None, f"section {name} is not a model"
        found.extend(_tables(model, (name,), notes))
    return found


def _tables(
    model: type[BaseModel],
    path: tuple[str, ...],
    notes: dict[tuple[str, ...], str],
) -> Iterator[Table]:
    about = _about(model)
    rows: list[Row] = []
    nested: list[tuple[type[BaseModel], tuple[str, ...], FieldInfo | None]] = []
    for key, sub in model.model_fields.items():
        inner = _model_of(sub.annotation)
        entries = _dict_model(sub.annotation)
        if inner is not None:
            nested.append((inner, (*path, key), sub))
        elif entries is not None:
            nested.append((entries, (*path, key, "NAME"), sub))
        else:
            rows.append(_row(path, key, sub, notes))
    if model.model_config.get("extra") == "allow":
        extra = typing.get_type_hints(model).get("__pydantic_extra__")
        entries = _dict_model(extra)
        if entries is not None:
            nested.append((entries, (*path, "ROLE" if path == ("guardrails",) else "NAME"), None))
    if rows or not nested:
        yield Table(path, about, rows)
    elif about:
        yield Table(path, about, [])
    for inner_model, inner_path, inner_field in nested:
        tables = list(_tables(inner_model, inner_path, notes))
        if inner_field is not None and tables and inner_path[-1] == "NAME":
            tables[0] = _with_defaults(tables[0], inner_field)
        yield from tables


def _with_defaults(table: Table, field: FieldInfo) -> Table:
    default = _default_value(field)
    if isinstance(default, dict) and default:
        shipped = ", ".join(f"`{name}`" for name in default)
        about = f"{table.about}\n\nShipped: {shipped} (see the defaults below)."
    else:
        about = f"{table.about}\n\nNone by default."
    return Table(table.path, about.strip(), table.rows)


def _row(
    path: tuple[str, ...], key: str, field: FieldInfo, notes: dict[tuple[str, ...], str]
) -> Row:
    note = field.description or _note(notes, (*path, key))
    if note.replace(" ", "") == "|".join(_choices(field)):
        note = ""  # the comment only lists the choices, which the type column shows
    env = ENV_PREFIX + "__".join(p if p.isupper() else p.upper() for p in (*path, key))
    env = env.replace("__NAME__", "__<NAME>__").replace("__ROLE__", "__<ROLE>__")
    return Row(key, _type(field), _default(field), env, _sentence(note) if note else "")


def _note(notes: dict[tuple[str, ...], str], path: tuple[str, ...]) -> str:
    """The note of `path`; a placeholder (`NAME`) matches any name of the shipped file,
    unless the note is about that name alone (it quotes it: `the "scripted" kind`)."""
    for known, note in notes.items():
        if len(known) != len(path):
            continue
        names = [k for p, k in zip(path, known, strict=True) if p.isupper()]
        same = all(p == k or p.isupper() for p, k in zip(path, known, strict=True))
        if same and not any(f'"{name}"' in note for name in names):
            return note
    return ""


def _choices(field: FieldInfo) -> list[str]:
    return [
        str(v)
        for a in _union(field.annotation)
        if typing.get_origin(a) is Literal
        for v in typing.get_args(a)
    ]


def _about(model: type[BaseModel]) -> str:
    doc = inspect.getdoc(model) or ""
    if doc == inspect.getdoc(BaseModel):
        return ""
    return _DESIGN_REF.sub("", doc).strip()


def _sentence(text: str) -> str:
    return _DESIGN_REF.sub("", text).strip()


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model of `Model` or `Model | None`, else None."""
    candidates = [a for a in _union(annotation) if a is not type(None)]
    if len(candidates) == 1 and _is_model(candidates[0]):
        return typing.cast(type[BaseModel], candidates[0])
    return None


def _dict_model(annotation: Any) -> type[BaseModel] | None:
    """The value model of `dict[str, Model]`, else None."""
    if typing.get_origin(annotation) is dict:
        _, value = typing.get_args(annotation)
        if _is_model(value):
            return typing.cast(type[BaseModel], value)
    return None


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def _union(annotation: Any) -> tuple[Any, ...]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


def _type(field: FieldInfo) -> str:
    parts = [_type_name(a) for a in _union(field.annotation) if a is not type(None)]
    text = " or ".join(parts)
    limits = [_limit(m) for m in field.metadata]
    text += "".join(f", {limit}" for limit in limits if limit)
    if type(None) in _union(field.annotation):
        text += "; or none"
    return text


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return " \\| ".join(json.dumps(v) for v in typing.get_args(annotation))
    if origin in (list, tuple):
        return f"list of {_type_name(typing.get_args(annotation)[0])}"
    if annotation is SecretStr:
        return "str (secret: never shown)"
    return str(getattr(annotation, "__name__", annotation))


_LIMITS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}


def _limit(meta: Any) -> str:
    """`>= 0` for pydantic's `Ge(ge=0)` (and its kin), `non-empty` for `MinLen(1)`."""
    for name, sign in _LIMITS.items():
        if type(meta).__name__ == name.capitalize() and hasattr(meta, name):
            return f"{sign} {getattr(meta, name)}"
    length = getattr(meta, "min_length", None)
    if type(meta).__name__ == "MinLen" and isinstance(length, int):
        return "non-empty" if length == 1 else f"at least {length} long"
    return ""


def _default_value(field: FieldInfo) -> Any:
    if field.default is not PydanticUndefined:
        return field.default
    if field.default_factory is not None:
        return field.default_factory()  # type: ignore[call-arg]
    return PydanticUndefined


def _default(field: FieldInfo) -> str:
    value = _default_value(field)
    if value is PydanticUndefined:
        return "required"
    if value is None:
        return "none"
    return f"`{_toml(value)}`"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, BaseModel):
        return _toml(value.model_dump(exclude_defaults=True))
    return repr(value)


# -- the page ---------------------------------------------------------------------------------


def render() -> str:
    """The whole of docs/configuration.md."""
    notes = toml_notes(TOML_PATH.read_text(encoding="utf-8")) if TOML_PATH.is_file() else {}
    out = [
        "# Configuration reference",
        "",
        f"<!-- Generated from agent_runtime.config.RuntimeConfig by `{COMMAND}`;",
        "     tests/agent_runtime/test_config_reference.py fails when it is stale. -->",
        "",
        "`Runtime.start(config=None)` and `load_config()` read, lowest precedence first: the",
        "defaults below (the shipped `config/runtime.toml` repeats them), the TOML file",
        f"(`${CONFIG_PATH_ENV}`, else `config/runtime.toml` in the working directory, if it",
        f"exists), then environment variables `{ENV_PREFIX}<SECTION>__<KEY>`: the path of",
        "the key in upper case, its names joined by a double underscore. An environment",
        "value is text parsed to the key's type (`10`, `true`, `0.5`, a string), a list or",
        'table as JSON (`["anthropic", "openai"]`), and `none` or `null` unsets a key. A',
        'value in the file must have the key\'s own TOML type: `max_retries = 5`, not `"5"`;',
        '`log_content = true`, not `"true"` (an integer is taken for a float). No number',
        "may be infinite or NaN (`inf`, `nan`), from the file or the environment.",
        f"Any other `{ENV_PREFIX}*` variable is an error, as are unknown keys and values of",
        "the wrong type: the `ConfigError` names the key, the value and where it came from.",
        "A `RuntimeConfig` built in Python (`RuntimeConfig(memory=MemoryConfig(...))`) takes",
        "the same keys.",
        "",
        "A default of *none* means the key is unset (TOML has no null: leave it out).",
        "`NAME` and `ROLE` stand for names you choose (`[llm.profiles.mine]`).",
        "",
    ]
    all_tables = tables(notes)
    out.append(
        "Sections: "
        + ", ".join(f"[`[{'.'.join(t.path)}]`](#{_anchor(t)})" for t in all_tables)
        + "."
    )
    out.append("")
    for table in all_tables:
        out.append(f"## `[{'.'.join(table.path)}]`")
        out.append("")
        if table.about:
            out.extend([table.about, ""])
        if table.rows:
            out.append("| key | type | default | environment variable | note |")
            out.append("| --- | --- | --- | --- | --- |")
            for row in table.rows:
                note = row.note.replace("|", "\\|")
                out.append(f"| `{row.key}` | {row.type} | {row.default} | `{row.env}` | {note} |")
            out.append("")
    out.extend(_shipped_profiles())
    return "\n".join(out).rstrip() + "\n"


def _anchor(table: Table) -> str:
    return re.sub(r"[^a-z0-9_ -]", "", f"[{'.'.join(table.path)}]".lower()).replace(" ", "-")


def _shipped_profiles() -> list[str]:
    defaults = RuntimeConfig().llm.profiles
    out = [
        "## The shipped profiles",
        "",
        "`[llm] profiles` holds these when no file or variable sets it. A file that has",
        "`[llm.profiles.X]` tables replaces the whole table, so it lists every profile it",
        "keeps (the shipped `config/runtime.toml` repeats these five).",
        "",
        "| profile | provider | model | base_url | api_key_env |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, profile in defaults.items():
        out.append(
            f"| `{name}` | `{profile.provider}` | `{profile.model}` | "
            f"{_cell(profile.base_url)} | {_cell(profile.api_key_env)} |"
        )
    return [*out, ""]


def _cell(value: str | None) -> str:
    return "-" if value is None else f"`{value}`"


def main(argv: Sequence[str] | None = None) -> int:
    """Print, write (`--write`) or check (`--check`) docs/configuration.md."""
    parser = argparse.ArgumentParser(prog="python -m agent_runtime.cli.config_reference")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"rewrite {DOC_PATH.name}")
    mode.add_argument("--check", action="store_true", help="exit 1 if it is stale")
    args = parser.parse_args(argv)
    page = render()
    if args.write:
        DOC_PATH.parent.mkdir(parents=True, exist_ok=True)
        DOC_PATH.write_text(page, encoding="utf-8")
        return 0
    if args.check:
        current = DOC_PATH.read_text(encoding="utf-8") if DOC_PATH.is_file() else ""
        if current != page:
            print(f"{DOC_PATH} is stale: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
