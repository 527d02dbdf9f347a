"""ProviderConfiguration: the one boundary for editing the provider profiles and fallback pools.

A settings screen or an admin endpoint changes `[llm] profiles` and `[llm] pools` of the config
file only through it, in two steps:

- `preview(change)` computes the edit without writing: a `ConfigPreview` with the unified
  diff, a one-line summary, the `revision` of the file it was computed from and, for a change
  that removes something, the exact `confirmation` text.
- `apply(preview, confirm=...)` writes that edit only if the file is still at that revision
  (else `ConcurrentConfigEdit`, and nothing is written) and, for a destructive change, only
  with the preview's confirmation text (else `ConfirmationRequired`).

Guarantees:
- The result is checked against the whole config schema (`RuntimeConfig`) before `preview`
  returns: a change that would make the file fail `load_config` is an `InvalidConfigChange`
  naming each problem.
- Comments, key order, blank lines and everything the change does not touch stay as they
  were (tomlkit); a UTF-8 byte-order mark is kept.
- The write is atomic (temporary file, fsync, rename), and writers through this class take
  turns on a lock of the file, so of two edits previewed at the same revision one is applied
  and the other raises `ConcurrentConfigEdit`.
- No result, error or log line holds a credential: profiles name the environment variable of
  their key, never the key; changes carrying one are refused without repeating it; the diff
  masks credential-looking values elsewhere in the file (a `dsn`, a URL's password); errors
  name keys and problems, never the values given.
- Environment overrides (`AGENT_RUNTIME_*`) are not the file's and are not consulted.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from tomlkit.exceptions import TOMLKitError

from agent_runtime._errors import ConfigError
from agent_runtime.config import LLMConfig, RuntimeConfig, check_file_types, file_type_hint
from agent_runtime.llm._config_changes import (
    AddPoolMember,
    AddProfile,
    ConfigChange,
    InvalidConfigChange,
    RemovePoolMember,
    RemoveProfile,
    UpdateProfile,
)
from agent_runtime.llm._config_file import locked, read_file, replace_file, revision
from supervisors._log import get_logger

log = get_logger(__name__)

_BOM = "\ufeff"
_CHANGE: TypeAdapter[ConfigChange] = TypeAdapter(ConfigChange)
_CHANGE_TYPES = (AddProfile, UpdateProfile, RemoveProfile, AddPoolMember, RemovePoolMember)


class ConcurrentConfigEdit(ConfigError):
    """The config file changed since the preview was computed; nothing was written.

    Preview the change again against the file as it is now. `expected` is the preview's
    revision, `actual` the file's.
    """

    def __init__(self, path: Path, expected: str, actual: str) -> None:
        self.path = path
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"config file {path} changed since the preview (revision {expected}, now "
            f"{actual}): nothing was written; preview the change again"
        )


class ConfirmationRequired(ConfigError):
    """A destructive change was applied without its exact confirmation text; nothing was written.

    `expected` is the text to pass as `confirm=` (the preview's `confirmation`).
    """

    def __init__(self, expected: str, given: str | None) -> None:
        self.expected = expected
        problem = "needs" if given is None else "was not confirmed: it needs"
        super().__init__(f"this change removes something and {problem} confirm={expected!r}")


class ConfigPreview(BaseModel):
    """A change as it would be written: what `apply` takes.

    `revision` identifies the file the preview was computed from (opaque); `diff` is the
    unified diff of the file (credential-looking values masked), `summary` one line;
    `confirmation` is the exact text `apply(..., confirm=)` needs, None when the change
    removes nothing.
    """

    model_config = ConfigDict(frozen=True)

    path: str
    change: ConfigChange
    revision: str
    summary: str
    diff: str
    confirmation: str | None

    @property
    def destructive(self) -> bool:
        """Whether the change removes a profile or a pool member."""
        return self.confirmation is not None


class ConfigSnapshot(BaseModel):
    """The `[llm]` section as the file holds it now, and the file's revision."""

    model_config = ConfigDict(frozen=True)

    revision: str
    llm: LLMConfig


class ProviderConfiguration:
    """The provider profiles and fallback pools of one config file, edited with preview/apply.

    Thread-safe and safe across processes that edit the same file through this class (POSIX
    file lock). It holds no state between calls but the path: every call reads the file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def read(self) -> ConfigSnapshot:
        """The profiles and pools the file configures (the built-in profiles when it has none).

        Raises:
            ConfigError: the file cannot be read, or is not a valid configuration.
        """
        data = read_file(self.path)
        config = self._validated(_text(data, self.path), "the config file")
        return ConfigSnapshot(revision=revision(data), llm=config.llm)

    def preview(self, change: ConfigChange | Mapping[str, Any]) -> ConfigPreview:
        """Compute `change` (a change model, or its JSON form) against the file as it is now.

        Raises:
            InvalidConfigChange: the change is malformed, does not fit the configuration (an
                unknown profile, a profile a pool still uses, ...) or would make the file
                invalid; each problem is named.
            ConfigError: the file cannot be read or is not a valid configuration already.
        """
        parsed = _parse_change(change)
        data = read_file(self.path)
        before = _text(data, self.path)
        after, note = self._edited(before, parsed)
        return ConfigPreview(
            path=str(self.path),
            change=parsed,
            revision=revision(data),
            summary=parsed.summary() + (f" ({note})" if note else ""),
            diff=_diff(before, after, str(self.path)),
            confirmation=parsed.confirmation(),
        )

    def apply(self, preview: ConfigPreview, *, confirm: str | None = None) -> str:
        """Write the previewed change if the file is still at the preview's revision; return the
        file's new revision.

        Raises:
            ConfirmationRequired: the change removes something and `confirm` is not exactly
                the preview's `confirmation` (checked before the file is touched).
            ConcurrentConfigEdit: the file is not at the preview's revision any more.
            ValueError: the preview is of another file.
            ConfigError: the file cannot be read or written.
        """
        if Path(preview.path).resolve() != self.path.resolve():
            raise ValueError(f"this preview is of {preview.path}, not of {self.path}")
        expected = preview.change.confirmation()
        if expected is not None and confirm != expected:
            raise ConfirmationRequired(expected, confirm)
        with locked(self.path) as data:
            actual = revision(data)
            if actual != preview.revision:
                log.info(
                    "llm.config.edit_refused",
                    path=str(self.path),
                    change=preview.change.type,
                    expected_revision=preview.revision,
                    revision=actual,
                )
                raise ConcurrentConfigEdit(self.path, preview.revision, actual)
            # The same bytes and the same change give the same edit as the preview's.
            text = _text(data, self.path)
            after, _ = self._edited(text, preview.change)
            written = (_BOM + after if text.startswith(_BOM) else after).encode("utf-8")
            try:
                replace_file(self.path, written)
            except OSError as exc:
                raise ConfigError(f"config file {self.path} cannot be written: {exc}") from exc
        new_revision = revision(written)
        log.info(
            "llm.config.changed",
            path=str(self.path),
            change=preview.change.type,
            summary=preview.summary,
            previous_revision=actual,
            revision=new_revision,
        )
        return new_revision

    def _edited(self, text: str, change: ConfigChange) -> tuple[str, str | None]:
        """The file's text with `change` made, and the change's note."""
        current = self._validated(text, "the config file")
        try:
            document = tomlkit.parse(text.removeprefix(_BOM))
        except TOMLKitError as exc:
            raise ConfigError(f"config file {self.path} is not valid TOML: {exc}") from None
        note = change.edit(document, current.llm)
        after = tomlkit.dumps(document)
        try:
            self._validated(after, "the changed file")
        except ConfigError as exc:
            raise InvalidConfigChange([str(exc)]) from None
        return after, note

    def _validated(self, text: str, what: str) -> RuntimeConfig:
        try:
            data = tomllib.loads(text.removeprefix(_BOM))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {self.path} is not valid TOML: {exc}") from None
        try:
            config = RuntimeConfig.model_validate(data)
            check_file_types(data)
            return config
        except ValidationError as exc:
            problems = "; ".join(_problems(exc))
            raise ConfigError(f"{what} ({self.path}) would not load: {problems}") from None


def _text(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text: {exc}") from None


def _parse_change(change: object) -> ConfigChange:
    if isinstance(change, _CHANGE_TYPES):
        return change
    if isinstance(change, Mapping):
        try:
            return _CHANGE.validate_python(change)
        except ValidationError as exc:
            raise InvalidConfigChange(_problems(exc)) from None
    kinds = ", ".join(kind.__name__ for kind in _CHANGE_TYPES)
    raise InvalidConfigChange(
        [
            f"a {type(change).__name__} is not a configuration change (expected one of: {kinds}, "
            "or the JSON object of one)"
        ]
    )


def _problems(exc: ValidationError) -> list[str]:
    """Each error as `<where>: <what is wrong>`, never with the value that was given."""
    problems = []
    for error in exc.errors():
        context = error.get("ctx") or {}
        loc = ".".join(str(part) for part in error["loc"])
        where = loc or str(context.get("key", "the change"))
        if error["type"] == "extra_forbidden":
            hint = ""
            if any(word in where.lower() for word in ("key", "secret", "token", "password")):
                hint = (
                    " (a profile names the environment variable that holds its key, in "
                    "api_key_env, never the key itself)"
                )
            problems.append(f"{where}: unknown field{hint}")
        elif hint := file_type_hint(error["type"], error["input"]):
            problems.append(f"{where}: {error['msg']} ({hint})")
        else:
            problems.append(f"{where}: {error['msg']}")
    return problems


_SECRET_KEY = re.compile(
    r"^(?P<head>\s*#?\s*[\w.\"-]*(?:dsn|password|passwd|secret|token|api_key|apikey)\s*=\s*)"
    r"(?P<value>.+)$",
    re.IGNORECASE,
)
_URL_PASSWORD = re.compile(r"(?P<head>://[^/\s:@\"']*:)[^@\s\"']*(?=@)")


def _masked(line: str) -> str:
    """The diff line with credential-looking values replaced by `***`."""
    match = _SECRET_KEY.match(line)
    if match:
        return match["head"] + '"***"\n' if line.endswith("\n") else match["head"] + '"***"'
    return _URL_PASSWORD.sub(r"\g<head>***", line)


def _diff(before: str, after: str, path: str) -> str:
    lines = difflib.unified_diff(
        before.removeprefix(_BOM).splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=path,
        tofile=path,
        n=2,
    )
    return "".join(line[0] + _masked(line[1:]) if line[:1] in " +-" else line for line in lines)
