"""ThinkingBudgets: the reasoning token budget of each thinking level.

A leaf module so that both `agent_runtime.config` (which holds it as `[thinking_budgets]`) and
the LLM adapters (which send it) can import it without the LLM layer importing the config.
`agent_runtime.config.ThinkingBudgets` is its public path.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ThinkingBudgets(BaseModel):
    """Reasoning token budget per `thinking_level` (Anthropic, Gemini); `off` sends none."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    minimal: int = Field(default=1024, ge=0)
    low: int = Field(default=2048, ge=0)
    medium: int = Field(default=8192, ge=0)
    high: int = Field(default=16384, ge=0)
    xhigh: int = Field(default=32768, ge=0)
