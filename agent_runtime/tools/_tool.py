"""Tool: a callable the model can use, with its name, description and parameter schema."""

from __future__ import annotations

import inspect
import math
import re
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from agent_runtime.llm.types import ToolSpec
from agent_runtime.messages import Trust
from agent_runtime.tools._args import ModelValidator, ToolArgumentsError, error_entry
from agent_runtime.tools._context import ToolContext
from agent_runtime.tools._schema import ToolDefinitionError, build_function_schema, model_parameters

Validator = Callable[[Mapping[str, Any]], Mapping[str, Any]]
"""Checks and converts raw arguments; raises `ToolArgumentsError` (or `ValueError`) if bad."""

ApprovalPredicate = Callable[[ToolContext, dict[str, Any]], "bool | Awaitable[bool]"]
"""`(ctx, args) -> bool` (or `async def`): does this call need a human's approval?"""

RequiresApproval = bool | ApprovalPredicate
"""A tool's `requires_approval`: always, never, or decided per call by a predicate."""

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


class Tool:
    """A tool the model can call.

    Build one with `@tool` / `Tool.from_function`, or directly for a hand-written tool whose
    `execute(arguments: dict, ctx: ToolContext)` (sync or `async def`) receives the arguments
    and returns `str | ToolResult | pydantic model | JSON-able value` or raises.

    A hand-written tool's arguments are passed through unvalidated unless `validator` is
    given: a pydantic model class (lax coercion, JSON strings decoded, model-readable errors;
    `parameters` defaults to its schema) or a callable returning the arguments to use and
    raising `ToolArgumentsError` or `ValueError` when they are bad.

    Attributes are fixed after construction; treat a Tool as immutable. Calling the Tool calls
    the wrapped function directly (no validation, no context injection), so a decorated
    function stays usable in plain code.

    `requires_approval` (False by default): True makes every call of the tool wait for
    `Agent.approve` / `Agent.deny` before it runs; a predicate `(ctx, args) -> bool` decides
    per call (a plain function runs in the runtime's `tool_tasks` pool, an `async def` one
    on the loop; one that raises counts as True: a call is never run unapproved by mistake).

    Raises:
        ToolDefinitionError: (a `ValueError`) the name is not 1-64 letters, digits, `_` or `-`
            (the common provider rule); `execute` is not callable; `timeout` is not a positive
            number; `trust` is not `"trusted"`/`"untrusted"`; `validator` is not callable;
            `requires_approval` is neither a bool nor callable.
    """

    def __init__(
        self,
        name: str,
        description: str = "",
        parameters: Mapping[str, Any] | None = None,
        execute: Callable[..., Any] | None = None,
        *,
        parallel_safe: bool = False,
        timeout: float | None = None,
        trust: Trust = "trusted",
        validator: type[BaseModel] | Validator | None = None,
        requires_approval: RequiresApproval = False,
    ) -> None:
        self.name: str = _check_name(name)
        if not isinstance(requires_approval, bool) and not callable(requires_approval):
            raise ToolDefinitionError(
                f"tool {name!r}: requires_approval must be a bool or a callable (ctx, args)",
                name,
            )
        self.requires_approval: RequiresApproval = requires_approval
        if execute is None or not callable(execute):
            raise ToolDefinitionError(f"tool {name!r}: execute must be callable", name)
        self.execute: Callable[..., Any] = execute
        self.description: str = description
        self.parallel_safe: bool = bool(parallel_safe)
        self.timeout: float | None = _check_timeout(name, timeout)
        if trust not in ("trusted", "untrusted"):
            raise ToolDefinitionError(
                f"tool {name!r}: unknown trust {trust!r} (expected one of: trusted, untrusted)",
                name,
            )
        self.trust: Trust = trust
        self._validator: Validator | None
        if isinstance(validator, type) and issubclass(validator, BaseModel):
            self._validator = ModelValidator(validator)
            if parameters is None:
                parameters = model_parameters(validator)
        elif validator is None:
            self._validator = None
        elif callable(validator):
            self._validator = validator  # type: ignore[assignment]  # not a model class here
        else:
            raise ToolDefinitionError(f"tool {name!r}: validator must be callable", name)
        self.parameters: dict[str, Any] = dict(
            parameters if parameters is not None else _EMPTY_SCHEMA
        )
        self.fn: Callable[..., Any] | None = None
        """The decorated function (for `from_function` tools), else None."""

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        parallel_safe: bool = False,
        timeout: float | None = None,
        trust: Trust = "trusted",
        requires_approval: RequiresApproval = False,
    ) -> Tool:
        """Build a tool from a function (sync or `async def`), as `@tool` does.

        - Schema: from the signature via pydantic; unannotated parameters accept any value;
          parameters with defaults are optional. Type hints may name classes local to the
          calling scope.
        - Description: the docstring's first paragraph (empty without a docstring), unless
          `description` is given. Parameter descriptions come from `Annotated[...,
          Field(description=...)]` or a `Field(...)` default, else from the docstring's
          Google-style `Args:` section or Sphinx `:param name:` lines.
        - A parameter annotated `ToolContext` (or `ToolContext | None`), keyword or
          positional, any name, is injected at call time and left out of the schema.
        - Arguments are validated laxly ("42" -> 42, "true" -> True, 42 -> "42"); a JSON
          string where an object or array is expected is decoded; unknown arguments are
          ignored (and reported in the result's `details["ignored_arguments"]`).

        Raises:
            ToolDefinitionError: `fn` is not callable or already a Tool, has `*args` or
                `**kwargs`, has unresolvable hints or a type pydantic cannot handle, or the
                name or options are invalid (see `Tool`).
        """
        return function_tool(
            fn,
            name=name,
            description=description,
            parallel_safe=parallel_safe,
            timeout=timeout,
            trust=trust,
            localns=caller_locals(),
            requires_approval=requires_approval,
        )

    @property
    def is_async(self) -> bool:
        """True when `execute` is a coroutine function (it then runs on the event loop)."""
        return _is_async(self.execute)

    def spec(self) -> ToolSpec:
        """What the model sees of this tool: name, description and parameter schema."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    def validate_arguments(self, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """`(arguments to execute with, ignored unknown argument names)`.

        Raises:
            ToolArgumentsError: the arguments are invalid; it names every bad field.
        """
        if self._validator is None:
            return dict(arguments), []
        try:
            values = dict(self._validator(arguments))
        except ToolArgumentsError:
            raise
        except ValidationError as exc:
            raise ToolArgumentsError([error_entry(e) for e in exc.errors()]) from exc
        except ValueError as exc:
            entry = {
                "field": "(arguments)",
                "message": str(exc),
                "expected": None,
                "received": "the arguments",
                "type": None,
            }
            raise ToolArgumentsError([entry]) from exc
        ignored = (
            self._validator.ignored(arguments)
            if isinstance(self._validator, ModelValidator)
            else []
        )
        return values, ignored

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the wrapped function (or `execute`) directly: no validation, no injection."""
        return (self.fn or self.execute)(*args, **kwargs)

    def __repr__(self) -> str:
        options = "".join(
            [
                ", parallel_safe=True" if self.parallel_safe else "",
                f", timeout={self.timeout}" if self.timeout is not None else "",
                ", trust='untrusted'" if self.trust == "untrusted" else "",
                ", requires_approval=..." if self.requires_approval is not False else "",
            ]
        )
        return f"Tool({self.name!r}{options})"


def function_tool(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    parallel_safe: bool,
    timeout: float | None,
    trust: Trust,
    localns: Mapping[str, Any],
    requires_approval: RequiresApproval = False,
) -> Tool:
    """The Tool for `fn` (what `@tool` and `Tool.from_function` build); see `Tool.from_function`.

    `localns` resolves type hints naming classes local to the defining scope.
    """
    if isinstance(fn, Tool):
        raise ToolDefinitionError(f"{fn!r} is already a Tool", fn.name)
    if not callable(fn):
        raise ToolDefinitionError(f"a tool needs a function, got {fn!r}")
    tool_name = name if name is not None else getattr(fn, "__name__", None)
    if tool_name is None:
        raise ToolDefinitionError(f"{fn!r} has no __name__: pass name=")
    _check_name(tool_name)
    schema = build_function_schema(
        fn, tool_name, context_type=ToolContext, localns=localns, description=description
    )
    execute: Callable[..., Any]
    if _is_async(fn):

        async def execute(arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
            args, kwargs = schema.call_args(arguments, ctx)
            return await fn(*args, **kwargs)

    else:

        def execute(arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
            args, kwargs = schema.call_args(arguments, ctx)
            return fn(*args, **kwargs)

    made = Tool(
        tool_name,
        schema.description,
        schema.parameters,
        execute,
        parallel_safe=parallel_safe,
        timeout=timeout,
        trust=trust,
        validator=ModelValidator(schema.model),
        requires_approval=requires_approval,
    )
    made.fn = fn
    made.__doc__ = getattr(fn, "__doc__", None)
    return made


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ToolDefinitionError(
            f"invalid tool name {name!r} (expected 1-64 letters, digits, '_' or '-')",
            name if isinstance(name, str) else None,
        )
    return name


def _check_timeout(name: str, timeout: Any) -> float | None:
    if timeout is None:
        return None
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise ToolDefinitionError(
            f"tool {name!r}: invalid timeout {timeout!r} (expected seconds > 0, or None)", name
        )
    return float(timeout)


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004  # an object with `async def __call__`
    )


def caller_locals(depth: int = 2) -> Mapping[str, Any]:
    """The local namespace `depth` frames up (the scope defining a tool), or `{}`."""
    try:
        return dict(sys._getframe(depth).f_locals)
    except (AttributeError, ValueError):  # pragma: no cover - no frame introspection
        return {}
