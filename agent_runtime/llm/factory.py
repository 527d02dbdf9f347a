"""Building models from the named profiles of the runtime configuration.

A profile's `provider` is its kind, and each kind is built by the `ProfileBuilder` registered
for it with `register_profile_kind`. This module registers the kinds of the HTTP adapters
(`openai`, `openai_compatible`, `anthropic`, `gemini`); `agent_runtime.testing` registers
`scripted` when it is imported. A profile whose kind is not registered yet may name, in its
`plugin` key, a module whose import registers it: the shipped `scripted` profile names
`agent_runtime.testing`, so the LLM layer never imports test code itself.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable

from agent_runtime._errors import ConfigError
from agent_runtime.config import ModelProfile, RuntimeConfig, load_config
from agent_runtime.llm._port import ChatModel
from agent_runtime.llm.middleware.fallback import FallbackModel
from agent_runtime.llm.providers._http import HttpOptions
from agent_runtime.llm.providers.anthropic import anthropic
from agent_runtime.llm.providers.gemini import gemini
from agent_runtime.llm.providers.openai import openai, openai_compatible
from agent_runtime.llm.types import ModelPricing

ProfileBuilder = Callable[[str, ModelProfile, RuntimeConfig], ChatModel]
"""Builds the model of one profile from `(profile name, profile, whole config)`; raises
`ConfigError` for a profile it cannot build."""

_builders: dict[str, ProfileBuilder] = {}


def register_profile_kind(kind: str, builder: ProfileBuilder) -> None:
    """Build every profile whose `provider` is `kind` with `builder(name, profile, config)`.

    Meant to be called once, when the module that defines the kind is imported; registering a
    kind again replaces its builder (so reloading that module is harmless).
    """
    _builders[kind] = builder


def from_config(name: str | None = None, *, config: RuntimeConfig | None = None) -> ChatModel:
    """Build the model of profile `name` (default: `llm.default_profile`) from config.

    A `name` of one of `[llm.pools]` builds a `FallbackModel` over its members' models, in the
    pool's order and with its circuit-breaker settings.

    Profiles name a provider kind (`openai`, `openai_compatible`, `anthropic`, `gemini`, or
    `scripted` and any other kind registered with `register_profile_kind`), a model, an
    optional base_url, the environment variable holding the API key (read again on every
    request, so a rotated key is picked up) and optional pricing.

    Raises:
        ConfigError: no `name` was given and no `llm.default_profile` is configured, the
            profile does not exist, its kind is not registered, or its API key variable is
            not set (for a pool: that of any member).
    """
    config = config or load_config()
    name = name or config.llm.default_profile
    known = ", ".join(sorted(config.llm.profiles)) or "none"
    if name is None:
        raise ConfigError(
            "no model profile given and no default configured: pass a profile name to "
            "from_config, or set [llm] default_profile in config/runtime.toml (or the "
            f"environment variable AGENT_RUNTIME_LLM__DEFAULT_PROFILE); configured profiles: "
            f"{known}"
        )
    pool = config.llm.pools.get(name)
    if pool is not None:
        return FallbackModel(
            [from_config(member, config=config) for member in pool.members],
            failure_threshold=pool.failure_threshold,
            reset_timeout=pool.reset_timeout,
        )
    profile = config.llm.profiles.get(name)
    if profile is None:
        raise ConfigError(f"unknown model profile {name!r} (configured profiles: {known})")
    return _builder_for(name, profile)(name, profile, config)


def profile_pricing(profile: ModelProfile) -> ModelPricing | None:
    """The profile's pricing as the LLM layer's `ModelPricing` (None without pricing)."""
    return ModelPricing(**profile.pricing.model_dump()) if profile.pricing else None


def _builder_for(name: str, profile: ModelProfile) -> ProfileBuilder:
    kind = profile.provider
    if kind not in _builders and profile.plugin is not None:
        try:
            importlib.import_module(profile.plugin)
        except ImportError as exc:
            raise ConfigError(
                f"model profile {name!r}: its plugin module {profile.plugin!r} cannot be "
                f"imported: {exc}"
            ) from exc
        if kind not in _builders:
            raise ConfigError(
                f"model profile {name!r}: its plugin module {profile.plugin!r} did not "
                f"register profile kind {kind!r}"
            )
    builder = _builders.get(kind)
    if builder is None:
        registered = ", ".join(sorted(_builders))
        raise ConfigError(
            f"profile kind {kind!r} of model profile {name!r} is not registered (registered "
            f"kinds: {registered}); import the module that registers it (agent_runtime.testing "
            "registers 'scripted'), or name that module in the profile's plugin key"
        )
    return builder


def _api_key(name: str, profile: ModelProfile) -> Callable[[], str] | None:
    var = profile.api_key_env
    if var is None:
        return None
    if not os.environ.get(var):
        raise ConfigError(
            f"model profile {name!r} needs an API key: set the environment variable {var}"
        )
    return lambda: os.environ.get(var, "")


def _http_options(profile: ModelProfile, config: RuntimeConfig) -> HttpOptions:
    return {
        "timeout": config.llm.timeout,
        "connect_timeout": config.llm.connect_timeout,
        "request_timeout": config.llm.request_timeout,
        "idle_timeout": config.llm.idle_timeout,
        "pricing": profile_pricing(profile),
        "thinking_budgets": config.thinking_budgets,
    }


def _hosted(adapter: Callable[..., ChatModel]) -> ProfileBuilder:
    """The builder of a hosted provider's profiles: `adapter` at its own URL unless the profile
    names one."""

    def build(name: str, profile: ModelProfile, config: RuntimeConfig) -> ChatModel:
        key = _api_key(name, profile)
        options = _http_options(profile, config)
        if profile.base_url:
            return adapter(profile.model, key, base_url=profile.base_url, **options)
        return adapter(profile.model, key, **options)

    return build


def _build_openai_compatible(name: str, profile: ModelProfile, config: RuntimeConfig) -> ChatModel:
    key = _api_key(name, profile)
    if profile.base_url is None:
        raise ConfigError(f"model profile {name!r} (openai_compatible) needs a base_url")
    # api_key_env as the profile says: None is a keyless server (the `local` profile), which
    # must neither demand OPENAI_API_KEY nor send it to whatever listens on base_url.
    return openai_compatible(
        profile.base_url,
        profile.model,
        key,
        api_key_env=profile.api_key_env,
        **_http_options(profile, config),
    )


register_profile_kind("anthropic", _hosted(anthropic))
register_profile_kind("gemini", _hosted(gemini))
register_profile_kind("openai", _hosted(openai))
register_profile_kind("openai_compatible", _build_openai_compatible)
