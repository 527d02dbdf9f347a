"""`agent-runtime models check`: are the model names we ship still served by their providers?

For each profile (or the one `--profile` names), the model names that the config and the
package's built-in profile of the same name ship are compared with what the profile's provider
lists (`list_models()` of its adapter, built as `from_config` builds it). A name is served
when it is listed, or when a listed id is it plus a snapshot date (`claude-sonnet-4-5` is
served as `claude-sonnet-4-5-20250929`: Anthropic lists snapshots, not aliases). Profiles
whose key variable is unset or whose kind lists no models (`scripted`) are reported as not
checked. Exit status: 1 when any name is stale, else 2 when a listing failed or the profile
asked for could not be checked, else 0.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from rich.console import Console

from agent_runtime._errors import ConfigError
from agent_runtime.config import LLMConfig, ModelProfile, RuntimeConfig, load_config
from agent_runtime.llm.errors import LLMError
from agent_runtime.llm.factory import from_config

Status = Literal["served", "stale", "unchecked", "failed"]
DEFAULT_TIMEOUT = 30.0
_SNAPSHOT = r"-(?:\d{8}|\d{4}-\d{2}-\d{2})"


@runtime_checkable
class _Lister(Protocol):
    async def list_models(self) -> list[str]: ...


@dataclass(frozen=True)
class ModelCheck:
    """The verdict on one model name of one profile."""

    profile: str
    model: str
    origins: tuple[str, ...]  # "config" and/or "package"
    status: Status
    detail: str = ""


def served_as(name: str, listed: Sequence[str]) -> str | None:
    """The listed id that serves `name` (itself, or a dated snapshot of it), or None."""
    if name in listed:
        return name
    snapshot = re.compile(re.escape(name) + _SNAPSHOT)
    return max((m for m in listed if snapshot.fullmatch(m)), default=None)


def _names(name: str, configured: ModelProfile | None) -> dict[str, tuple[str, ...]]:
    """`{model name: origins}` the config and the package ship for profile `name`."""
    names: dict[str, list[str]] = {}
    if configured is not None and configured.model:
        names.setdefault(configured.model, []).append("config")
    builtin = LLMConfig().profiles.get(name)
    same_kind = configured is None or (
        builtin is not None and configured.provider == builtin.provider
    )
    if builtin is not None and builtin.model and same_kind:
        names.setdefault(builtin.model, []).append("package")
    return {model: tuple(origins) for model, origins in names.items()}


def _with_profile(config: RuntimeConfig, name: str, profile: ModelProfile) -> RuntimeConfig:
    llm = config.llm.model_copy(update={"profiles": {**config.llm.profiles, name: profile}})
    return config.model_copy(update={"llm": llm})


@dataclass(frozen=True)
class _Unlisted:
    status: Status  # "unchecked" or "failed"
    reason: str


async def _listed(config: RuntimeConfig, name: str, timeout: float) -> list[str] | _Unlisted:
    """The provider's model ids for profile `name`, or why they cannot be had."""
    try:
        model = from_config(name, config=config)
    except ConfigError as exc:
        return _Unlisted("unchecked", str(exc))
    if not isinstance(model, _Lister):
        kind = config.llm.profiles[name].provider
        return _Unlisted("unchecked", f"profile kind {kind!r} lists no models")
    try:
        async with asyncio.timeout(timeout):
            return await model.list_models()
    except TimeoutError:
        return _Unlisted("failed", f"the provider did not list its models within {timeout:g}s")
    except LLMError as exc:
        return _Unlisted("failed", str(exc))
    finally:
        close = getattr(model, "aclose", None)
        if close is not None:
            await close()


async def _check_profile(config: RuntimeConfig, name: str, timeout: float) -> list[ModelCheck]:
    configured = config.llm.profiles.get(name)
    names = _names(name, configured)
    if not names:
        return [ModelCheck(name, "", ("config",), "unchecked", "the profile names no model")]
    if configured is None:  # only the package has it: ask the provider of its built-in profile
        config = _with_profile(config, name, LLMConfig().profiles[name])
    listed = await _listed(config, name, timeout)
    if isinstance(listed, _Unlisted):
        return [
            ModelCheck(name, model, origins, listed.status, listed.reason)
            for model, origins in names.items()
        ]
    checks = []
    for model, origins in names.items():
        serving = served_as(model, listed)
        if serving == model:
            checks.append(ModelCheck(name, model, origins, "served"))
        elif serving is not None:
            checks.append(ModelCheck(name, model, origins, "served", f"as {serving}"))
        else:
            close = difflib.get_close_matches(model, listed, n=3, cutoff=0.5)
            hint = f"; close: {', '.join(close)}" if close else ""
            detail = f"not among the {len(listed)} models the provider lists{hint}"
            checks.append(ModelCheck(name, model, origins, "stale", detail))
    return checks


async def check_models(
    config: RuntimeConfig, profile: str | None = None, *, timeout: float = DEFAULT_TIMEOUT
) -> list[ModelCheck]:
    """Check the model names of `profile` (default: every profile of the config and every
    built-in one), asking the providers concurrently, each for at most `timeout` seconds.

    Raises:
        ConfigError: `profile` is neither configured nor built in.
    """
    known = sorted({*config.llm.profiles, *LLMConfig().profiles})
    if profile is not None and profile not in known:
        raise ConfigError(f"unknown model profile {profile!r} (profiles: {', '.join(known)})")
    names = [profile] if profile is not None else known
    results = await asyncio.gather(*(_check_profile(config, n, timeout) for n in names))
    return [check for checks in results for check in checks]


def exit_status(checks: Sequence[ModelCheck], *, asked: bool) -> int:
    """1 when a name is stale; else 2 when a listing failed, or when the profile asked for
    (`asked`) could not be checked; else 0."""
    if any(check.status == "stale" for check in checks):
        return 1
    if any(check.status == "failed" for check in checks):
        return 2
    if asked and any(check.status == "unchecked" for check in checks):
        return 2
    return 0


def render(checks: Sequence[ModelCheck], console: Console) -> None:
    """One line per model name, then a summary line."""
    width = max((len(check.profile) for check in checks), default=0)
    model_width = max((len(check.model) for check in checks), default=0)
    for check in checks:
        verdict = {
            "served": "served",
            "stale": "STALE",
            "unchecked": "not checked",
            "failed": "FAILED",
        }
        detail = f": {check.detail}" if check.detail else ""
        console.print(
            f"{check.profile:<{width}}  {check.model:<{model_width}}  "
            f"({'+'.join(check.origins)})  {verdict[check.status]}{detail}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    stale = sum(check.status == "stale" for check in checks)
    checked = sum(check.status in ("served", "stale") for check in checks)
    console.print(f"{stale} stale of {checked} checked model names", markup=False, highlight=False)


def add_models_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `models check [--profile NAME] [--timeout SECONDS]`."""
    models = commands.add_parser("models", help="check the model names the config ships")
    actions = models.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    check = actions.add_parser(
        "check",
        help="compare the shipped model names with each provider's list_models()",
        description=(__doc__ or "").split("\n\n", 1)[1],
    )
    check.add_argument("--profile", metavar="NAME", help="check this profile only")
    check.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"how long a provider may take to list its models (default {DEFAULT_TIMEOUT:g})",
    )


def run_models(args: argparse.Namespace) -> int:
    """The `models` command: print the checks; the exit status of `exit_status`."""
    try:
        config = load_config(args.config)
        checks = asyncio.run(check_models(config, args.profile, timeout=args.timeout))
    except ConfigError as exc:
        Console(stderr=True).print(
            f"agent-runtime models check: {exc}", markup=False, highlight=False
        )
        return 2
    render(checks, Console())
    return exit_status(checks, asked=args.profile is not None)
