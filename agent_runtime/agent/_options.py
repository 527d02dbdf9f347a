"""AgentOptions: the typed, validated options of one agent, completed from the runtime's config."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from agent_runtime._errors import ConfigError
from agent_runtime.config import QueueMode, RetryConfig, RuntimeConfig, ThinkingLevel
from agent_runtime.guardrails._base import Guardrail, validated
from agent_runtime.guardrails._spec import instantiate
from agent_runtime.llm.base import ChatModel, check_chat_model
from agent_runtime.llm.factory import from_config
from agent_runtime.loop._output import OutputSpec
from agent_runtime.loop.types import MessagesTransform, RetryPolicy
from agent_runtime.memory import MemoryPolicy
from agent_runtime.templates import Template
from agent_runtime.tools import Tool, ToolRegistry, check_unique

Restart = Literal["temporary", "transient"]
FOLLOW_UP_POLL_REMOVED = (
    "follow_up_poll was removed in 0.2: a follow-up never starts a run of its own (one sent "
    "once a run is ending waits for the next prompt's run); drop the option"
)
_TOOL_CHOICE_MODES = ("auto", "none", "required")


@functools.lru_cache(maxsize=16)
def _retry_policy(retry: RetryConfig) -> RetryPolicy:
    """The (frozen) config's retry policy, one frozen instance shared by the agents that take
    it (built per agent it was ~480 bytes of each idle agent)."""
    return RetryPolicy(**retry.model_dump())


class AgentOptionsDict(TypedDict, total=False):
    """The keyword options of `start_agent` (and `astart_agent`, `subagents.start`), typed for
    checkers and editors: `**options: Unpack[AgentOptionsDict]`. Each key is an `AgentOptions`
    field, as a caller may give it (a profile name for `model`, a list for `tools`,
    `memory=None` for the config's policy, `tool_registry=True` for the runtime's registry);
    `output_type` and `on_failure` are parameters of their own, typed with the agent's output.
    A test keeps the keys equal to `AgentOptions`' fields.
    """

    model: ChatModel | str
    system_prompt: str | Template
    tools: Sequence[Tool]
    steering_mode: QueueMode
    follow_up_mode: QueueMode
    max_tool_concurrency: int
    max_tool_turns: int
    tool_timeout: float | None
    retry: RetryPolicy
    memory: MemoryPolicy | Literal[False] | None
    restart: Restart
    thinking_level: ThinkingLevel
    tool_registry: ToolRegistry | Literal[True] | None
    abort_grace: float
    approval_timeout: float | None
    tool_choice: str | None
    temperature: float | None
    max_output_tokens: int | None
    context_transform: MessagesTransform | None
    guardrails: Sequence[Guardrail] | None
    output_retries: int


class AgentOptions(BaseModel):
    """What an agent is started with (DESIGN.md 7), frozen once built.

    `start_agent(key, **options)` builds one with `AgentOptions.build`, which fills what is not
    given from the runtime's config (`[agent]`, `[retry]`, `[memory]`, `[llm] default_profile`).
    The values changed later with `Agent.set_*` are kept in a copy the agent owns, so a restarted
    (`transient`) agent starts with them; each setter checks its value with these same rules
    (`check`), so a value that could not start a run never reaches the agent. Types are strict
    (no `"3"` for a number, no `True` for seconds, no bytes for a prompt) and seconds finite.

    Per model call (`LoopConfig` gets them as they are): `tool_choice` is `"auto"`, `"none"`,
    `"required"` or the name of one of the agent's tools, which the model must then call (sent
    only to a call that has tools; a forced choice holds until the model called, and the call
    answering tool results gets `"auto"`, so the run can end in a text answer); `temperature`
    (>= 0) and `max_output_tokens` (>= 1) go to the provider as given, None leaves the
    provider's default. `context_transform` (sync or
    `async def`, e.g. `context.make_transform(max_chars=...)`) rewrites the messages before
    every model call; on `ContextLengthExceededError` it is applied once more with half the
    budget and the call is made once more before the run fails (the loop's one retry of a
    context overflow; see `agent_runtime.loop`).

    `approval_timeout` (seconds, default None: until decided) bounds how long a tool call
    that `requires_approval` waits for `Agent.approve` / `Agent.deny`; then it is denied
    with reason `"approval_timeout"`.

    `guardrails` (Guardrail instances) check the agent's runs (`agent_runtime.Guardrail`);
    without them `build` takes the role's `[guardrails.ROLE] use` of the config, each class
    created anew for the agent (`configured_guardrails`); `guardrails=[]` turns them off.

    Typed output: with `output_type` (a pydantic model, or any type a `TypeAdapter` takes)
    every run's answer is asked for in the model's structured mode (or a forced
    `final_result` tool call, or JSON by instruction) and validated; an invalid one is told
    what failed and asked again `output_retries` times (default 1), then the run fails with
    `OutputValidationError`, unless `on_failure(exception)` maps the failure to a fallback
    output. `run`/`arun` take the same three per run.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    model: ChatModel
    system_prompt: str | Template = ""  # a Template renders per run; checked below
    tools: tuple[Tool, ...] = ()
    steering_mode: QueueMode = "one_at_a_time"
    follow_up_mode: QueueMode = "one_at_a_time"
    max_tool_concurrency: int = Field(default=8, ge=1, strict=True)
    max_tool_turns: int = Field(default=25, ge=1, strict=True)
    tool_timeout: float | None = Field(default=None, gt=0, strict=True, allow_inf_nan=False)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    memory: MemoryPolicy = Field(default_factory=MemoryPolicy)
    restart: Restart = "temporary"
    thinking_level: ThinkingLevel = "off"
    tool_registry: ToolRegistry | None = None
    abort_grace: float = Field(default=0.25, ge=0, strict=True, allow_inf_nan=False)
    # How long a tool call waits for approval before it is denied ("approval_timeout").
    approval_timeout: float | None = Field(default=None, gt=0, strict=True, allow_inf_nan=False)
    tool_choice: str | None = Field(default=None, strict=True, min_length=1)
    temperature: float | None = Field(default=None, ge=0, strict=True, allow_inf_nan=False)
    max_output_tokens: int | None = Field(default=None, ge=1, strict=True)
    # A `loop.types.MessagesTransform`, checked by `_check_context_transform` (callable).
    context_transform: Callable[..., Any] | None = None
    guardrails: tuple[Guardrail, ...] | None = None
    # Typed output (the default of every run; `run`/`arun` may override each): see `output`.
    output_type: Any = None
    output_retries: int = Field(default=1, ge=0, strict=True)
    on_failure: Callable[[Exception], Any] | None = None

    @field_validator("model", mode="plain")  # the whole check: no second isinstance after it
    @classmethod
    def _check_model(cls, value: object) -> object:
        return check_chat_model(value)

    @field_validator("system_prompt", mode="before")
    @classmethod
    def _check_system_prompt(cls, value: object) -> object:
        if not isinstance(value, str | Template):
            raise TypeError(
                f"system_prompt must be a str, not {type(value).__name__} "
                "(or an agent_runtime.Template)"
            )
        return value

    @field_validator("tools", mode="before")
    @classmethod
    def _check_tools(cls, value: object) -> object:
        if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
            raise TypeError(f"tools must be a list of Tools, not {type(value).__name__}")
        tools = tuple(value)
        if not all(isinstance(t, Tool) for t in tools):
            raise TypeError(
                "tools must be agent_runtime.Tool objects (decorate functions with @tool)"
            )
        check_unique(tools)
        return tools

    @field_validator("retry", mode="before")
    @classmethod
    def _check_retry(cls, value: object) -> object:
        if not isinstance(value, RetryPolicy):
            raise TypeError(f"retry must be a RetryPolicy, not {type(value).__name__}")
        return value

    @field_validator("memory", mode="before")
    @classmethod
    def _check_memory(cls, value: object) -> object:
        if value is False:
            return MemoryPolicy.none()
        if not isinstance(value, MemoryPolicy):
            raise TypeError(f"memory must be a MemoryPolicy, not {type(value).__name__}")
        return value

    @field_validator("temperature", mode="before")
    @classmethod
    def _check_temperature(cls, value: object) -> object:
        if isinstance(value, bool):  # strict float takes an int, and so a bool
            raise TypeError(f"temperature must be a number or None, not {value!r}")
        return value

    @field_validator("context_transform", mode="plain")
    @classmethod
    def _check_context_transform(cls, value: object) -> object:
        if value is not None and not callable(value):
            raise TypeError(
                "context_transform must be a callable over the message list (e.g. "
                f"agent_runtime.context.make_transform(max_chars=...)), not {type(value).__name__}"
            )
        return value

    @field_validator("guardrails", mode="plain")
    @classmethod
    def _check_guardrails(cls, value: object) -> tuple[Guardrail, ...] | None:
        if value is None:
            return None
        if isinstance(value, str | bytes | Guardrail) or not hasattr(value, "__iter__"):
            raise TypeError(f"guardrails must be a list of Guardrails, not {type(value).__name__}")
        return tuple(validated(g) for g in value)

    @field_validator("on_failure", mode="plain")
    @classmethod
    def _check_on_failure(cls, value: object) -> object:
        if value is not None and not callable(value):
            raise TypeError(
                "on_failure must be a callable taking the run's exception and returning the "
                f"fallback output, not {type(value).__name__}"
            )
        return value

    @model_validator(mode="after")
    def _check_output_type(self) -> AgentOptions:
        if self.output_type is not None:
            OutputSpec.of(self.output_type, self.output_retries)  # TypeError names the type
        return self

    @property
    def output(self) -> OutputSpec | None:
        """The agent's default typed output (`output_type` with `output_retries`), or None."""
        if self.output_type is None:
            return None
        return OutputSpec.of(self.output_type, self.output_retries)

    @model_validator(mode="after")
    def _check_tool_choice(self) -> AgentOptions:
        choice = self.tool_choice
        if choice is None or choice in _TOOL_CHOICE_MODES or self.tool_registry is not None:
            return self  # a registry's tools are known only when a run starts
        names = [t.name for t in self.tools]
        if choice not in names:
            raise ValueError(
                f"tool_choice {choice!r} names no tool of the agent (expected one of: "
                f"{', '.join([*_TOOL_CHOICE_MODES, *names])})"
            )
        return self

    @field_validator("tool_registry", mode="before")
    @classmethod
    def _check_registry(cls, value: object) -> object:
        if value is not None and not isinstance(value, ToolRegistry):
            raise TypeError("tool_registry must be True, None or a ToolRegistry")
        return value

    @classmethod
    def build(
        cls,
        config: RuntimeConfig,
        options: dict[str, Any],
        *,
        tools: ToolRegistry,
        role: str | None = None,
    ) -> AgentOptions:
        """Options from `start_agent` keywords, completed from `config`.

        Without `guardrails=` (or with None), an agent of `role` gets new instances of the
        guardrails `[guardrails.ROLE]` names, so a class that cannot be created fails the start.

        `memory=None` takes `[memory]` of the config; `tool_registry=True` means `tools` (the
        runtime's registry); `model=` a str is the name of one of the config's `[llm]`
        profiles or pools (`model_of`); without `model=` the config's `[llm] default_profile`
        is built.

        Raises:
            TypeError: an unknown option (named), no model and no default profile, or a value of
                the wrong type (named).
            ValueError: a value out of range or not among the allowed ones (named).
            ConfigError: `model=` names no configured profile (the known ones named), or the
                profile cannot be built (its API key variable unset, ...).
        """
        if "follow_up_poll" in options:
            raise TypeError(FOLLOW_UP_POLL_REMOVED)
        unknown = sorted(set(options) - set(cls.model_fields))
        if unknown:
            raise TypeError(
                f"unknown agent option(s) {', '.join(map(repr, unknown))} "
                f"(expected some of: {', '.join(cls.model_fields)})"
            )
        agent, retry, mem = config.agent, config.retry, config.memory
        values: dict[str, Any] = {
            "steering_mode": agent.steering_mode,
            "follow_up_mode": agent.follow_up_mode,
            "max_tool_concurrency": agent.max_tool_concurrency,
            "max_tool_turns": agent.max_tool_turns,
            "tool_timeout": agent.tool_timeout,
            "abort_grace": agent.abort_grace,
            "approval_timeout": agent.approval_timeout,
            "thinking_level": agent.thinking_level,
            "restart": agent.restart,
            "retry": _retry_policy(retry),
            **{k: v for k, v in options.items() if not (k == "memory" and v is None)},
        }
        if "memory" not in values:
            values["memory"] = MemoryPolicy(read=mem.read, write=mem.write, last_n=mem.last_n)
        if values.get("tool_registry") is True:
            values["tool_registry"] = tools
        if "model" not in values:
            values["model"] = default_model(config)
        else:
            values["model"] = model_of(values["model"], config)
        if values.get("guardrails") is None and role is not None:
            values["guardrails"] = configured_guardrails(config, role)
        try:
            return cls(**values)
        except ValidationError as exc:
            raise _plain_error(exc) from None

    def replace(self, **changes: Any) -> AgentOptions:
        """A copy with `changes` applied (validated like the original).

        Raises:
            TypeError, ValueError: as `build`, naming the option.
        """
        try:
            return type(self)(**{**dict(self), **changes})
        except ValidationError as exc:
            raise _plain_error(exc) from None

    def check(self, name: str, value: object) -> Any:
        """`value` as option `name` would hold it (a list of tools becomes a tuple), checked
        by the rules of `start_agent`; for the `Agent.set_*` setters.

        Raises:
            TypeError, ValueError: as `build`, naming the option.
        """
        return getattr(self.replace(**{name: value}), name)


def configured_guardrails(config: RuntimeConfig, role: str) -> tuple[Guardrail, ...]:
    """New instances of the guardrails `[guardrails.ROLE] use` names for `role`.

    Raises:
        ValueError, TypeError: a class cannot be created without arguments, or its instance
            is not a valid Guardrail (named).
    """
    return tuple(instantiate(spec) for spec in config.guardrails.for_role(role))


def model_of(model: object, config: RuntimeConfig) -> object:
    """`model` itself, or the model of the `[llm]` profile (or pool) it names when a str, built
    as the HTTP API builds a profile (`llm.from_config`); anything else is left for the
    `model` option's own check (a ChatModel or a TypeError).

    Raises:
        ConfigError: `model` names no profile or pool of `config` (the known ones named), or
            the profile cannot be built (its API key variable unset, an unknown kind).
    """
    if not isinstance(model, str):
        return model
    llm = config.llm
    if model not in llm.profiles and model not in llm.pools:
        known = ", ".join(sorted([*llm.profiles, *llm.pools])) or "none"
        raise ConfigError(
            f"model {model!r} is not a ChatModel nor a configured model profile "
            f"(configured profiles: {known})"
        )
    return from_config(model, config=config)


def default_model(config: RuntimeConfig) -> ChatModel:
    """The model of the configured `[llm] default_profile`.

    Raises:
        TypeError: no profile is configured; the message says both ways to give a model.
    """
    if config.llm.default_profile is None:
        raise TypeError(
            "start_agent needs a model: pass model=... (a ChatModel, e.g. "
            "agent_runtime.llm.openai_compatible(...), or the name of an [llm] profile, e.g. "
            "model='local') or configure a profile with [llm] default_profile in "
            "config/runtime.toml (or AGENT_RUNTIME_LLM__DEFAULT_PROFILE)"
        )
    return from_config(config=config)


def _plain_error(exc: ValidationError) -> Exception:
    """The first problem of `exc` as the TypeError or ValueError it is, naming the option."""
    error = exc.errors()[0]
    name = ".".join(str(p) for p in error["loc"]) or "option"
    context = error.get("ctx") or {}
    cause = context.get("error")
    if isinstance(cause, TypeError | ValueError) and not isinstance(cause, ValidationError):
        return cause
    value = error.get("input")
    message = f"invalid {name} {value!r}: {error['msg']}"
    if error["type"] in ("is_instance_of", "model_type", "model_attributes_type"):
        return TypeError(message)
    return ValueError(message)
