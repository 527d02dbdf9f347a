"""`Workflow[State]`: the base class of durable workflows, and the definition read from a
subclass (its state model and steps)."""

from __future__ import annotations

import importlib
import threading
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from agent_runtime._key import AgentKey
from agent_runtime.workflows._errors import InvalidWorkflow, UnknownStep
from agent_runtime.workflows._recovery import NO_RECOVERY, Recovery
from agent_runtime.workflows._step import StepSpec, step_of

StateT = TypeVar("StateT", bound=BaseModel)

_classes: dict[str, type[Workflow[Any]]] = {}
_classes_lock = threading.Lock()


class Workflow(Generic[StateT]):
    """A durable state machine whose steps (`@step` methods) call agents:
    `class Trip(Workflow[TripState])`, with `TripState` a pydantic model.

    A step reads and replaces `self.state` (an instance of the state model), then says what
    comes next with `ctx.transition_to(name)` or `ctx.end()`. Run it with
    `runtime.workflows.start(Trip, TripState(...))`.

    Guarantees (see `Workflows` for the store):
    - the state, the current step and its attempt are committed to the runtime's session
      store before a step runs and after it ends; a step's changes to `self.state` are
      committed only when it ends, so a failed or interrupted attempt leaves no trace in the
      state and its retry starts from the state committed before it;
    - a step runs again after a failure (per its recovery) and after a crash or restart that
      interrupted it (`runtime.workflows.resume()`): steps must be idempotent, or use
      `ctx.attempt` to know that an earlier attempt may have done part of the work;
    - a step that ended and was committed never runs again for that visit.

    Class attributes: `default_recovery` (a `Recovery`; `max_retries(0)` without failover by
    default) applies to steps without their own; `initial_step` (a step name, default the
    first step declared) is where `start` begins unless told otherwise. `agent_options(key)` gives
    the options `ctx.agent(key)` starts a missing agent with (default: none, so the
    config's defaults and `[llm] default_profile`).

    A workflow is found again after a restart by its class's module and qualified name:
    define it at a module's top level, importable by the process that resumes it.
    """

    default_recovery: ClassVar[Recovery] = NO_RECOVERY
    initial_step: ClassVar[str | None] = None
    state: StateT

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        with _classes_lock:
            _classes[type_name(cls)] = cls

    def agent_options(self, key: AgentKey) -> dict[str, Any]:
        """The options `ctx.agent(key)` starts the agent under `key` with when none is
        running (merged under the options given to `ctx.agent`). Default: none."""
        return {}


@dataclass(frozen=True)
class Definition:
    """What a Workflow subclass declares: its stored name, state model, steps (in
    declaration order) and first step."""

    cls: type[Workflow[Any]]
    name: str
    state_type: type[BaseModel]
    steps: dict[str, StepSpec]
    first: str

    def step(self, name: object, *, where: str) -> StepSpec:
        """The step called `name`.

        Raises:
            UnknownStep: there is none (`where` says what asked).
            TypeError: `name` is not a str.
        """
        if not isinstance(name, str):
            raise TypeError(f"{where}: a step name must be a str, not {type(name).__name__}")
        spec = self.steps.get(name)
        if spec is None:
            raise UnknownStep(self.cls.__qualname__, name, list(self.steps), where=where)
        return spec

    def recovery(self, spec: StepSpec) -> Recovery:
        """The step's own recovery, else the workflow's default."""
        return spec.recovery if spec.recovery is not None else self.cls.default_recovery


def type_name(cls: type) -> str:
    """The name a workflow class is stored under: `module:qualname`."""
    return f"{cls.__module__}:{cls.__qualname__}"


def definition(cls: object) -> Definition:
    """The definition of the Workflow subclass `cls` (read once, then cached on the class).

    Raises:
        InvalidWorkflow: `cls` is not a Workflow subclass, declares no state model or no step,
            or a recovery fails over to a step it does not have (each named).
    """
    if not isinstance(cls, type) or not issubclass(cls, Workflow) or cls is Workflow:
        raise InvalidWorkflow(f"expected a subclass of Workflow, not {cls!r}")
    cached = cls.__dict__.get("_workflow_definition")
    if isinstance(cached, Definition):
        return cached
    steps: dict[str, StepSpec] = {}
    for klass in reversed(cls.__mro__):
        for attr, value in vars(klass).items():
            spec = step_of(value)
            if spec is not None:
                steps[attr] = spec
            elif attr in steps:  # overridden by a plain attribute
                del steps[attr]
    name = cls.__qualname__
    if not steps:
        raise InvalidWorkflow(f"workflow {name} declares no step (decorate methods with @step())")
    if not isinstance(cls.default_recovery, Recovery):
        raise InvalidWorkflow(
            f"workflow {name}: default_recovery must be a Recovery (max_retries(n)...), "
            f"not {cls.default_recovery!r}"
        )
    first = cls.initial_step if cls.initial_step is not None else next(iter(steps))
    found = Definition(cls, type_name(cls), _state_type(cls), steps, first)
    found.step(first, where=f"workflow {name}: initial_step")
    if cls.default_recovery.failover is not None:
        found.step(cls.default_recovery.failover, where=f"{name}.default_recovery: failover_to")
    for spec in steps.values():
        if spec.recovery is not None and spec.recovery.failover is not None:
            found.step(spec.recovery.failover, where=f"step {name}.{spec.name}: failover_to")
    setattr(cls, "_workflow_definition", found)  # noqa: B010 (a private cache attribute)
    return found


def _state_type(cls: type) -> type[BaseModel]:
    for klass in cls.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            if typing.get_origin(base) is Workflow:
                (arg,) = typing.get_args(base)
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    return arg
                if not isinstance(arg, TypeVar):
                    raise InvalidWorkflow(
                        f"workflow {cls.__qualname__}: the state must be a pydantic model "
                        f"class, not {arg!r}"
                    )
    raise InvalidWorkflow(
        f"workflow {cls.__qualname__} declares no state model: "
        f"class {cls.__name__}(Workflow[MyState]) with MyState a pydantic BaseModel"
    )


def resolve(name: str) -> type[Workflow[Any]] | None:
    """The workflow class stored as `name` (`module:qualname`): one defined in this process,
    else imported; None if it cannot be found."""
    with _classes_lock:
        known = _classes.get(name)
    if known is not None:
        return known
    module_name, _, qualname = name.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return None
    if isinstance(found, type) and issubclass(found, Workflow):
        return found
    return None
