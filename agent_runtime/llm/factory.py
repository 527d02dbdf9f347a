"""Building models from the named profiles of the runtime configuration."""

from __future__ import annotations

import os
from collections.abc import Callable

from agent_runtime._errors import ConfigError
from agent_runtime.config import ModelProfile, RuntimeConfig, load_config
from agent_runtime.llm.base import ChatModel
from agent_runtime.llm.types import ModelPricing


def from_config(name: str | None = None, *, config: RuntimeConfig | None = None) -> ChatModel:
    """Build the model of profile `name` (default: `llm.default_profile`) from config.

    Profiles name a provider (`scripted`, `openai`, `openai_compatible`, `anthropic`,
    `gemini`), a model, an optional base_url, the environment variable holding the API key
    (read again on every request, so a rotated key is picked up) and optional pricing.

    Raises:
        ConfigError: the profile does not exist, or its API key variable is not set.
    """
    config = config or load_config()
    name = name or config.llm.default_profile
    profile = config.llm.profiles.get(name)
    if profile is None:
        known = ", ".join(sorted(config.llm.profiles)) or "none"
        raise ConfigError(f"unknown model profile {name!r} (configured profiles: {known})")
    return _build(name, profile, config)


def _api_key(name: str, profile: ModelProfile) -> Callable[[], str] | None:
    var = profile.api_key_env
    if var is None:
        return None
    if not os.environ.get(var):
        raise ConfigError(
            f"model profile {name!r} needs an API key: set the environment variable {var}"
        )
    return lambda: os.environ.get(var, "")


def _build(name: str, profile: ModelProfile, config: RuntimeConfig) -> ChatModel:
    pricing = ModelPricing(**profile.pricing.model_dump()) if profile.pricing else None
    common = {
        "timeout": config.llm.timeout,
        "connect_timeout": config.llm.connect_timeout,
        "pricing": pricing,
        "thinking_budgets": config.thinking_budgets,
    }
    if profile.provider == "scripted":
        from agent_runtime.testing.scripted import ScriptedModel

        return ScriptedModel(model=profile.model or "scripted", pricing=pricing, echo=True)
    key = _api_key(name, profile)
    base = {"base_url": profile.base_url} if profile.base_url else {}
    if profile.provider == "anthropic":
        from agent_runtime.llm.providers.anthropic import anthropic

        return anthropic(profile.model, key, **base, **common)  # type: ignore[arg-type]
    if profile.provider == "gemini":
        from agent_runtime.llm.providers.gemini import gemini

        return gemini(profile.model, key, **base, **common)  # type: ignore[arg-type]
    from agent_runtime.llm.providers.openai import openai, openai_compatible

    if profile.provider == "openai":
        return openai(profile.model, key, **base, **common)  # type: ignore[arg-type]
    if profile.base_url is None:
        raise ConfigError(f"model profile {name!r} (openai_compatible) needs a base_url")
    # api_key_env as the profile says: None is a keyless server (the `local` profile), which
    # must neither demand OPENAI_API_KEY nor send it to whatever listens on base_url.
    return openai_compatible(
        profile.base_url,
        profile.model,
        key,
        api_key_env=profile.api_key_env,
        **common,  # type: ignore[arg-type]
    )
