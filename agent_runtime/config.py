"""Typed runtime configuration: config/runtime.toml, then `AGENT_RUNTIME_*` environment overrides.

Every default named in DESIGN.md lives on these models, and config/runtime.toml repeats them
(a test keeps the two equal). Precedence, lowest first: model defaults, the TOML file,
environment variables `AGENT_RUNTIME_<SECTION>__<KEY>` (nested keys continue with `__`, e.g.
`AGENT_RUNTIME_LLM__PROFILES__OPENAI__MODEL`); `AGENT_RUNTIME_CONFIG` names the file. Any
other `AGENT_RUNTIME_*` variable is a mistake (`AGENT_RUNTIME_MAXTOOLTURNS`) and is rejected
rather than ignored. Unknown keys, wrong types, a `default_profile` naming no profile and a file
that cannot be read fail with a `ConfigError` naming the key, the value and where it came from.
A UTF-8 byte-order mark at the start of the file is accepted (editors on Windows write one).

Types: a value in the file must have its key's own TOML type (`max_retries = 5`, not `"5"`;
`log_content = true`, not `"true"`; an integer is accepted for a float); an environment
variable is text and is parsed to the key's type (`"5"`, `"true"`, `"2.5"`). Infinity and
NaN are refused for every number, from the file (`inf`, `nan`) and the environment alike.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from agent_runtime._errors import ConfigError
from agent_runtime._thinking import ThinkingBudgets as ThinkingBudgets  # public path

ENV_PREFIX = "AGENT_RUNTIME_"
CONFIG_PATH_ENV = "AGENT_RUNTIME_CONFIG"
DEFAULT_PATH = Path("config") / "runtime.toml"

OverflowPolicy = Literal["error", "drop_oldest", "drop_newest", "block"]
QueueMode = Literal["one_at_a_time", "all"]
ThinkingLevel = Literal["off", "minimal", "low", "medium", "high", "xhigh"]


class _Section(BaseModel):
    # No key takes infinity or NaN: `max_delay = inf` would make every backoff wait forever.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class SupervisionConfig(_Section):
    """Restart intensity of the runtime's supervisors and sizes of its task pools."""

    max_restarts: int = Field(default=3, ge=0)
    max_seconds: float = Field(default=5.0, gt=0)
    shutdown: float = Field(default=5.0, ge=0)
    max_agents: int | None = Field(default=None, ge=0)
    tool_workers: int = Field(default=16, ge=1)


class EventStreamConfig(_Section):
    """The bound of a run's EventStream (DESIGN.md 6): what `loop.stream` on a Runtime uses
    where its LoopConfig leaves `stream_max_queue` / `stream_overflow` None."""

    max_queue: int = Field(default=10_000, ge=1)
    overflow: OverflowPolicy = "error"


class SubscriptionConfig(_Section):
    """Defaults of `agent.subscribe()` (DESIGN.md 7): what a subscription made without these
    arguments gets, including those of `Agent.stream` and `Agent.astream`."""

    max_queue: int = Field(default=1000, ge=1)
    overflow: OverflowPolicy = "block"
    block_timeout: float = Field(default=30.0, gt=0)


class AgentConfig(_Section):
    """Defaults of `runtime.start_agent(...)` options (DESIGN.md 7)."""

    steering_mode: QueueMode = "one_at_a_time"
    follow_up_mode: QueueMode = "one_at_a_time"
    max_tool_concurrency: int = Field(default=8, ge=1)
    max_tool_turns: int = Field(default=25, ge=1)
    tool_timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    abort_grace: float = Field(default=0.25, ge=0, allow_inf_nan=False)
    approval_timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    thinking_level: ThinkingLevel = "off"
    restart: Literal["temporary", "transient"] = "temporary"

    @model_validator(mode="before")
    @classmethod
    def _removed_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "follow_up_poll" in data:
            raise ValueError(
                "follow_up_poll was removed in 0.2: a follow-up never starts a run of its own "
                "(one sent once a run is ending waits for the next prompt's run); delete the key"
            )
        return data


class RetryConfig(_Section):
    """Provider retry policy (DESIGN.md 7): capped exponential backoff, in seconds."""

    max_retries: int = Field(default=3, ge=0)
    base_delay: float = Field(default=2.0, ge=0)
    max_delay: float = Field(default=30.0, ge=0)
    max_retry_after: float = Field(default=120.0, ge=0)


class ModelPricingConfig(_Section):
    """Price in USD per million tokens."""

    input: float = Field(default=0.0, ge=0)
    output: float = Field(default=0.0, ge=0)
    cached_input: float = Field(default=0.0, ge=0)


class ModelProfile(_Section):
    """A named model: which adapter, which model, where, and which env var holds the key.

    `provider` is the profile's kind: `openai`, `openai_compatible`, `anthropic`, `gemini`,
    `scripted`, or any kind registered with `agent_runtime.llm.register_profile_kind` (checked
    when the model is built, not when the config is loaded). `plugin` names a module to import
    when the kind is not registered yet; importing it registers the kind.
    """

    provider: str = Field(min_length=1)
    model: str = ""
    base_url: str | None = None
    api_key_env: str | None = None
    pricing: ModelPricingConfig | None = None
    plugin: str | None = None


class FallbackPoolConfig(_Section):
    """A named fallback pool: `from_config(<pool>)` builds a `FallbackModel` over the models of
    `members` (profile names, tried in this order), each behind a circuit breaker that opens
    after `failure_threshold` consecutive failures for `reset_timeout` seconds."""

    members: list[str] = Field(min_length=1)
    failure_threshold: int = Field(default=3, ge=1)
    reset_timeout: float = Field(default=30.0, gt=0, allow_inf_nan=False)


def _default_profiles() -> dict[str, ModelProfile]:
    return {
        "scripted": ModelProfile(
            provider="scripted", model="scripted", plugin="agent_runtime.testing"
        ),
        "openai": ModelProfile(
            provider="openai", model="gpt-4o-mini", api_key_env="OPENAI_API_KEY"
        ),
        "anthropic": ModelProfile(
            provider="anthropic", model="claude-sonnet-4-5", api_key_env="ANTHROPIC_API_KEY"
        ),
        "gemini": ModelProfile(
            provider="gemini", model="gemini-2.5-flash", api_key_env="GEMINI_API_KEY"
        ),
        "local": ModelProfile(
            provider="openai_compatible", model="local", base_url="http://127.0.0.1:8080/v1"
        ),
    }


class LLMConfig(_Section):
    """The LLM layer: HTTP timeouts, the default profile and the profiles themselves.

    `default_profile` is None unless configured, so no model is picked behind the caller's
    back: `from_config()` without a name then raises a ConfigError saying how to name one.
    Timeouts, in seconds: `timeout` is httpx's per-read timeout (any byte resets it),
    `connect_timeout` the connect one, `request_timeout` bounds a whole model call and
    `idle_timeout` a stream's wait for its next data event (SSE comments and keep-alive pings
    do not reset it); the last two end the call with a retryable `NetworkError` naming them.
    `pools` are fallback pools over profiles (none by default); a pool's name is not also a
    profile's, and `default_profile` may name either.
    """

    default_profile: str | None = None
    timeout: float = Field(default=60.0, gt=0)
    connect_timeout: float = Field(default=10.0, gt=0)
    request_timeout: float = Field(default=600.0, gt=0)
    idle_timeout: float = Field(default=120.0, gt=0)
    profiles: dict[str, ModelProfile] = Field(default_factory=_default_profiles)
    pools: dict[str, FallbackPoolConfig] = Field(default_factory=dict)


class MemoryConfig(_Section):
    """Session memory (DESIGN.md 9): durable SQLite by default.

    `compact_above_bytes` turns on automatic compaction (`SessionMemory.auto_compact`): a
    session whose history an append takes past that many bytes is summarised in the
    background by the model of the profile `compaction_profile` (a key of `[llm] profiles`,
    required then). Both are None (off) by default.
    """

    # "sqlite": the file at `path`; "memory": process memory; "postgres": the server at `dsn`
    # (a libpq connection string or postgresql:// URI, needs the `postgres` extra), shared by
    # processes. `dsn` is a secret: no repr, dump or config error shows it (set it with
    # AGENT_RUNTIME_MEMORY__DSN to keep a password out of the file).
    store: Literal["sqlite", "memory", "postgres"] = "sqlite"
    path: str = ".agent_runtime/memory.sqlite3"
    dsn: SecretStr | None = None
    read: bool = True
    write: bool = True
    last_n: int | None = Field(default=None, ge=1)
    compact_above_bytes: int | None = Field(default=None, ge=1)
    compaction_profile: str | None = Field(default=None, min_length=1)

    @field_validator("path")
    @classmethod
    def _check_path(cls, value: str) -> str:
        # SQLite opens a private temporary database for "": durable in name only.
        if not value.strip():
            raise ValueError("the session memory path must name a file, not be empty")
        return value

    @field_validator("dsn")
    @classmethod
    def _check_dsn(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("the session memory dsn must name a database, not be empty")
        return value


class TelemetryConfig(_Section):
    """Logs and traces (DESIGN.md 10). `configure_logging = true` makes every Runtime.start
    configure structlog (`telemetry.configure_logging`) as `configure_logging=True` does; the
    CLI always does. `log_format = "auto"`: console on a TTY, else JSON.
    `log_content` is what `agent_runtime.telemetry.log_content()` answers once a Runtime
    started with it (`ObservableModel` follows it unless given `log_content=`).
    `status_socket` (None: off) is the path of a Unix socket on which a Runtime serves its
    `tree()` and `stats()` as JSON while it runs, for `agent-runtime top`."""

    # Runtime.start configures structlog only when asked: configure_logging=True, or this.
    configure_logging: bool = False
    log_format: Literal["auto", "console", "json"] = "auto"
    log_level: Literal["debug", "info", "warning", "error", "critical"] = "warning"
    log_content: bool = False
    # OpenTelemetry providers Runtime.start installs (once per process; see
    # agent_runtime.telemetry.install_exporter): none (the application's SDK, if any) |
    # console (stdout) | otlp (needs the package opentelemetry-exporter-otlp).
    exporter: Literal["none", "console", "otlp"] = "none"
    status_socket: str | None = Field(default=None, min_length=1)

    @field_validator("exporter", mode="before")
    @classmethod
    def _none_exporter(cls, value: object) -> object:
        # AGENT_RUNTIME_TELEMETRY__EXPORTER=none arrives as None (the environment's null).
        return "none" if value is None else value


class GuardrailRoleConfig(_Section):
    """`[guardrails.ROLE]`: the guardrails of that role's agents started without
    `guardrails=`: `use` names Guardrail subclasses as `"module:Class"`, each checked when the
    config loads (imported, a Guardrail subclass) and created with no arguments per agent."""

    use: tuple[str, ...] = ()

    @field_validator("use", mode="after")
    @classmethod
    def _check_use(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        from agent_runtime.guardrails._spec import load_class  # imports the user's modules

        for spec in value:
            load_class(spec)  # raises ValueError naming the entry
        return value


class GuardrailsConfig(_Section):
    """`[guardrails]`: one `[guardrails.ROLE]` table per role (none by default)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    if TYPE_CHECKING:  # `init=False`: no `__pydantic_extra__` argument for checkers (pydantic
        # 2.7 refuses the assignment at run time, where the annotation alone is read)
        __pydantic_extra__: dict[str, GuardrailRoleConfig] = Field(init=False)
    else:
        __pydantic_extra__: dict[str, GuardrailRoleConfig]

    def for_role(self, role: str) -> tuple[str, ...]:
        """The `"module:Class"` names configured for `role` (none when it has no table)."""
        extra = self.__pydantic_extra__ or {}
        section = extra.get(role)
        return section.use if section is not None else ()


class ServerTokenConfig(_Section):
    """`[server.tokens.NAME]`: one bearer token of the HTTP gateway (`agent-runtime serve`).

    The token itself is `token` or, to keep it out of the file, the environment variable
    named by `token_env` (read when the server starts); exactly one of the two. `sessions`
    lists the sessions its holder may read and steer (another session answers 403); left
    out, every session. `profiles` lists the model profiles (or pools) of `[llm]` its holder
    may run through the LLM proxy `/v1/llm/stream` (another answers 403); left out, every
    profile for a token without `sessions` and none for a token with `sessions`. NAME
    appears in logs, the token never does.
    """

    token: SecretStr | None = None
    token_env: str | None = Field(default=None, min_length=1)
    sessions: tuple[str, ...] | None = None
    profiles: tuple[str, ...] | None = None

    @model_validator(mode="after")
    def _one_source(self) -> ServerTokenConfig:
        if (self.token is None) == (self.token_env is None):
            raise ValueError(
                "a server token needs exactly one of token (the value) or token_env (the "
                "environment variable holding it)"
            )
        if self.token is not None and len(self.token.get_secret_value()) < 16:
            raise ValueError("a server token must be at least 16 characters long")
        return self


class ServerConfig(_Section):
    """`[server]`: the HTTP/SSE gateway (`agent_runtime.server`, extra `server`).

    `tokens` (none by default: the server then refuses to start unless told
    `--insecure-no-auth`); `max_body_bytes` bounds a request body and `max_prompt_chars` a
    prompt, steering or follow-up text (both answered 413 past that); `replay_buffer` is how
    many events each agent's and each session's SSE stream keeps for `Last-Event-ID` resume
    (what falls out is reported as `events_dropped`), and `replay_max_bytes` bounds the bytes
    all those streams hold together (past it the oldest closed agent stream is released
    first; see docs/server.md); `sse_keepalive` the seconds between
    keep-alive comments on an idle stream; `cors_origins` the origins allowed to call the API
    from a browser (empty: CORS off, the default), and the only other origins whose
    state-changing requests are not refused as cross-site. `tools` names tools as
    `"package.module:name"` (a `Tool`, or a function made one), imported when `agent-runtime
    serve` starts into the runtime's tool registry (`runtime.tools`), so clients can name
    them when they start an agent (none by default). Under `agent-runtime serve`,
    `header_timeout` is the seconds a connection may take to send a request's headers (then
    it is closed) and `max_connections` how many connections may be open at once (past it,
    the one waiting longest for its headers is closed; 503 if none waits).
    """

    tokens: dict[str, ServerTokenConfig] = Field(default_factory=dict)
    max_body_bytes: int = Field(default=1_048_576, ge=1)
    max_prompt_chars: int = Field(default=100_000, ge=1)
    replay_buffer: int = Field(default=1000, ge=1)
    replay_max_bytes: int = Field(default=67_108_864, ge=65_536)
    sse_keepalive: float = Field(default=15.0, gt=0, allow_inf_nan=False)
    cors_origins: tuple[str, ...] = ()
    header_timeout: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    max_connections: int = Field(default=1000, ge=1)
    tools: tuple[str, ...] = ()

    @field_validator("tools", mode="after")
    @classmethod
    def _check_tools(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for spec in value:  # the form only: the modules are imported when the server starts
            check_tool_spec(spec)
        return value


_TOOL_SPEC = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def check_tool_spec(spec: str) -> str:
    """`spec` if it has the form `"package.module:name"` (of `[server] tools`).

    Raises:
        ValueError: it has not; the message names it and shows the form.
    """
    if not _TOOL_SPEC.fullmatch(spec):
        raise ValueError(
            f"tool {spec!r} is not of the form 'package.module:name' (e.g. 'myapp.tools:add')"
        )
    return spec


class RuntimeConfig(_Section):
    """The whole configuration of a Runtime; every section has complete defaults."""

    supervision: SupervisionConfig = Field(default_factory=SupervisionConfig)
    event_stream: EventStreamConfig = Field(default_factory=EventStreamConfig)
    subscription: SubscriptionConfig = Field(default_factory=SubscriptionConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    thinking_budgets: ThinkingBudgets = Field(default_factory=ThinkingBudgets)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    guardrails: GuardrailsConfig = Field(default_factory=GuardrailsConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)

    @model_validator(mode="after")
    def _check_memory_dsn(self) -> RuntimeConfig:
        if self.memory.store == "postgres" and self.memory.dsn is None:
            raise PydanticCustomError(
                "missing_dsn",
                'is needed by memory.store = "postgres" (the server\'s connection string, '
                'e.g. "postgresql://user@host/db")',
                {"key": "memory.dsn", "value": None},
            )
        return self

    @model_validator(mode="after")
    def _check_pools(self) -> RuntimeConfig:
        profiles = self.llm.profiles
        known = ", ".join(sorted(profiles)) or "none"
        for name, pool in self.llm.pools.items():
            key = f"llm.pools.{name}"
            if name in profiles:
                raise PydanticCustomError(
                    "pool_shadows_profile",
                    "is also the name of a profile: give the pool a name of its own",
                    {"key": key, "value": name},
                )
            for member in pool.members:
                if member not in profiles:
                    raise PydanticCustomError(
                        "unknown_profile",
                        "names no configured profile (configured profiles: {known})",
                        {"key": f"{key}.members", "value": member, "known": known},
                    )
            if len(set(pool.members)) != len(pool.members):
                raise PydanticCustomError(
                    "duplicate_member",
                    "names a profile more than once",
                    {"key": f"{key}.members", "value": pool.members},
                )
        return self

    @model_validator(mode="after")
    def _check_default_profile(self) -> RuntimeConfig:
        name = self.llm.default_profile
        if name is not None and name not in self.llm.profiles and name not in self.llm.pools:
            known = ", ".join(sorted(self.llm.profiles)) or "none"
            raise PydanticCustomError(
                "unknown_profile",
                "names no configured profile (configured profiles: {known})",
                {"key": "llm.default_profile", "value": name, "known": known},
            )
        return self

    @model_validator(mode="after")
    def _check_compaction_profile(self) -> RuntimeConfig:
        memory = self.memory
        name = memory.compaction_profile
        if name is None and memory.compact_above_bytes is not None:
            raise PydanticCustomError(
                "missing_profile",
                "turns automatic compaction on, so memory.compaction_profile must name the "
                "profile of [llm] profiles whose model summarises",
                {"key": "memory.compact_above_bytes", "value": memory.compact_above_bytes},
            )
        if name is not None and name not in self.llm.profiles:
            known = ", ".join(sorted(self.llm.profiles)) or "none"
            raise PydanticCustomError(
                "unknown_profile",
                "names no configured profile (configured profiles: {known})",
                {"key": "memory.compaction_profile", "value": name, "known": known},
            )
        return self

    @model_validator(mode="after")
    def _check_token_profiles(self) -> RuntimeConfig:
        served = {*self.llm.profiles, *self.llm.pools}
        for token_name, entry in self.server.tokens.items():
            for name in entry.profiles or ():
                if name not in served:
                    known = ", ".join(sorted(served)) or "none"
                    raise PydanticCustomError(
                        "unknown_profile",
                        "names no configured profile or pool (configured: {known})",
                        {
                            "key": f"server.tokens.{token_name}.profiles",
                            "value": name,
                            "known": known,
                        },
                    )
        return self


def load_config(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> RuntimeConfig:
    """Load the configuration.

    `path` None means `$AGENT_RUNTIME_CONFIG` if set, else `config/runtime.toml` in the
    current directory if it exists, else the built-in defaults (identical to the shipped
    file). `env` defaults to `os.environ`.

    Raises:
        ConfigError: the file is missing or not TOML, a key is unknown, or a value has the
            wrong type; one line per problem, naming key, value and source.
    """
    env = os.environ if env is None else env
    data: dict[str, Any] = {}
    source = "defaults"
    file = _resolve_path(path, env)
    if file is not None:
        source = str(file)
        data = _read_toml(file)
    from_file = copy.deepcopy(data)
    from_env = _apply_env(data, env)
    try:
        config = RuntimeConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source, from_env)) from None
    if file is not None:
        # The file's values must have their keys' types; the environment's were parsed above
        # and are checked here as the values they became.
        for keys in from_env:
            _put(from_file, keys, _value_at(config, keys))
        try:
            check_file_types(from_file)
        except ValidationError as exc:
            raise ConfigError(_describe(exc, source, from_env)) from None
    return config


def check_file_types(data: Mapping[str, Any]) -> None:
    """Check that every value of `data`, a config file as `tomllib` read it, has its key's own
    type: a string is not taken for a number or a boolean, a float not for an integer (an
    integer is taken for a float). Call it on data that `RuntimeConfig.model_validate`
    accepted.

    Raises:
        pydantic.ValidationError: one error per value of another type (its `loc` the key).
    """
    RuntimeConfig.model_validate_json(json.dumps(_plain(data)), strict=True)


def _plain(value: Any) -> Any:
    """`value` as JSON-able data, secrets revealed: what a validated config holds, as input."""
    if isinstance(value, BaseModel):
        fields = {name: getattr(value, name) for name in type(value).model_fields}
        fields.update(value.__pydantic_extra__ or {})
        return {name: _plain(item) for name, item in fields.items()}
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _value_at(config: RuntimeConfig, keys: tuple[str, ...]) -> Any:
    """The validated value of the key at `keys` (as the environment set it)."""
    node: Any = config
    for key in keys:
        if isinstance(node, BaseModel):
            extra = node.__pydantic_extra__ or {}
            node = extra[key] if key in extra else getattr(node, key)
        else:
            node = node[key]
    return node


def _put(data: dict[str, Any], keys: tuple[str, ...], value: Any) -> None:
    node = data
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[keys[-1]] = value


def _read_toml(file: Path) -> dict[str, Any]:
    source = str(file)
    try:
        text = file.read_text(encoding="utf-8-sig")  # -sig: a leading BOM is dropped
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {source} does not exist") from exc
    except IsADirectoryError as exc:
        raise ConfigError(f"config file {source} is a directory, not a TOML file") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {source} is not UTF-8 text: {exc}") from exc
    except OSError as exc:  # unreadable (permissions, a directory on Windows, ...)
        raise ConfigError(f"config file {source} cannot be read: {exc}") from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {source} is not valid TOML: {exc}") from exc


def _resolve_path(path: str | os.PathLike[str] | None, env: Mapping[str, str]) -> Path | None:
    if path is not None:
        return Path(path)
    if env.get(CONFIG_PATH_ENV):
        return Path(env[CONFIG_PATH_ENV])
    return DEFAULT_PATH if DEFAULT_PATH.is_file() else None


def _apply_env(data: dict[str, Any], env: Mapping[str, str]) -> dict[tuple[str, ...], str]:
    """Write `AGENT_RUNTIME_A__B__C=v` into data[a][b][c]; return {path: variable name}."""
    applied: dict[tuple[str, ...], str] = {}
    unknown = sorted(
        name
        for name in env
        if name.startswith(ENV_PREFIX) and name != CONFIG_PATH_ENV and "__" not in name
    )
    if unknown:
        sections = ", ".join(name.upper() for name in RuntimeConfig.model_fields)
        raise ConfigError(
            f"unknown config environment variable(s) {', '.join(unknown)}: overrides are "
            f"named {ENV_PREFIX}<SECTION>__<KEY> with a double underscore between the names "
            f"(e.g. {ENV_PREFIX}AGENT__MAX_TOOL_TURNS=10; sections: {sections}), and "
            f"{CONFIG_PATH_ENV} names the config file"
        )
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX) or name == CONFIG_PATH_ENV:
            continue
        keys = tuple(part.lower() for part in name[len(ENV_PREFIX) :].split("__"))
        if not all(keys):
            raise ConfigError(f"malformed config environment variable {name}")
        node = data
        for key in keys[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise ConfigError(
                    f"environment variable {name} sets a key under {key!r}, which is not a table"
                )
            node = child
        node[keys[-1]] = _parse_env_value(raw)
        applied[keys] = name
    return applied


def _parse_env_value(raw: str) -> Any:
    text = raw.strip()
    if text.lower() in ("null", "none"):
        return None
    if text[:1] in ("[", "{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return raw
    return raw


def file_type_hint(kind: str, value: Any) -> str:
    """What to write instead, for a file's value of another type than its key's (pydantic
    error type `kind`); "" for any other error."""
    if kind not in ("int_type", "float_type", "bool_type"):
        return ""
    if isinstance(value, str):
        return "a TOML string: write the value without quotes"
    if isinstance(value, float) and kind == "int_type":
        return "a TOML float: write a whole number, without a decimal point"
    return ""


def _describe(exc: ValidationError, source: str, from_env: dict[tuple[str, ...], str]) -> str:
    lines = []
    for error in exc.errors():
        loc = tuple(str(part) for part in error["loc"])
        context = error.get("ctx") or {}
        if not loc and "key" in context:  # a check across keys names the key it is about
            loc = tuple(context["key"].split("."))
            error = {**error, "input": context["value"]}
        key = ".".join(loc)
        origin = next(
            (
                f"environment variable {var}"
                for path, var in from_env.items()
                if loc[: len(path)] == path or path[: len(loc)] == loc
            ),
            source,
        )
        if error["type"] == "extra_forbidden":
            lines.append(
                f"unknown config key {key!r} (value {error['input']!r}) in {origin}"
                + _did_you_mean(loc)
            )
        elif origin == source and (hint := file_type_hint(error["type"], error["input"])):
            lines.append(
                f"invalid config key {key!r}: value {error['input']!r} in {origin}: "
                f"{error['msg']} ({hint})"
            )
        else:
            lines.append(
                f"invalid config key {key!r}: value {error['input']!r} in {origin}: {error['msg']}"
            )
    return "; ".join(lines)


def _did_you_mean(loc: tuple[str, ...]) -> str:
    """`: did you mean 'tool_timeout'?` for an unknown key close to a key of its table (a
    section of RuntimeConfig), else ""."""
    table: Any = RuntimeConfig
    for part in loc[:-1]:
        field = table.model_fields.get(part)
        table = field.annotation if field is not None else None
        if not (isinstance(table, type) and issubclass(table, BaseModel)):
            return ""
    close = difflib.get_close_matches(loc[-1], list(table.model_fields), n=1, cutoff=0.6)
    return f": did you mean {close[0]!r}?" if close else ""
