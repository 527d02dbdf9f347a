"""The JSON bodies of the gateway's API: what a request sends and what it gets back.

Requests reject unknown fields (a typo is an error that names the field, not a silently
ignored option). These models are the API's contract: the OpenAPI document is made from them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_runtime.config import QueueMode, ThinkingLevel
from agent_runtime.messages import Message, Usage


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Reply(BaseModel):
    model_config = ConfigDict(frozen=True)


class StartOptions(_Request):
    """`POST /v1/agents/{session}/{role}/{index}`: start an agent under that key.

    `model` names a profile (or pool) of the config's `[llm]` section, default its
    `default_profile`; `tools` names tools of the runtime's `ToolRegistry`
    (`runtime.tools`). The other fields are the `start_agent` options of the same names;
    left out, the config's `[agent]` defaults apply.
    """

    model: str | None = Field(default=None, min_length=1)
    system_prompt: str = ""
    tools: list[str] = Field(default_factory=list)
    steering_mode: QueueMode | None = None
    follow_up_mode: QueueMode | None = None
    max_tool_turns: int | None = Field(default=None, ge=1, le=10_000)
    max_tool_concurrency: int | None = Field(default=None, ge=1, le=1000)
    thinking_level: ThinkingLevel | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_output_tokens: int | None = Field(default=None, ge=1)
    restart: Literal["temporary", "transient"] | None = None


class PromptBody(_Request):
    """`POST .../prompt` and `POST .../run`: the user's text."""

    text: str = Field(min_length=1)


class RunBody(PromptBody):
    """`POST .../run`: the text, and how long to wait for the run's end (seconds)."""

    timeout: float = Field(default=300.0, gt=0, le=3600)


class QueueBody(_Request):
    """`POST .../steer` and `POST .../follow_up`: a message for the agent's queue, and an
    optional system prompt that applies from the model call that message goes into."""

    text: str = Field(min_length=1)
    system_prompt: str | None = None


class AbortBody(_Request):
    """`POST .../abort`: why (the run's `Canceled.reason`)."""

    reason: str = Field(default="user_abort", min_length=1, max_length=200)


class ApprovalBody(_Request):
    """`POST .../approvals/{tool_call_id}`: approve the waiting tool call (with `args` in
    place of the model's, when given) or deny it (`reason`, which the model reads); `by`
    names who decided (default: the token's principal)."""

    decision: Literal["approve", "deny"]
    args: dict[str, Any] | None = None
    reason: str = Field(default="denied", min_length=1, max_length=2000)
    by: str | None = Field(default=None, min_length=1, max_length=200)


class Decided(_Reply):
    """The decision taken on a waiting tool call."""

    tool_call_id: str
    approved: bool
    by: str | None = None


class AgentRef(_Reply):
    """An agent's key, as the API names it."""

    session: str
    role: str
    index: int


class Started(_Reply):
    """The agent that `POST /v1/agents/...` started, with its model and tools."""

    agent: AgentRef
    model: str
    tools: list[str]


class RunStarted(_Reply):
    """A run that `prompt` started: its id tags every event of the run."""

    run_id: str


class Queued(_Reply):
    """A steering or follow-up message was queued."""

    queued: Literal["steer", "follow_up"]


class Aborted(_Reply):
    """`aborted` is False when no run was in progress."""

    aborted: bool


class Stopped(_Reply):
    """`stopped` is False when the agent had stopped already."""

    stopped: bool


class RunOutcome(_Reply):
    """How a run that `POST .../run` waited for ended.

    `outcome`: `completed` (AgentEnd), `failed` (Error: `reason` says why) or `canceled`
    (Canceled: `reason`). `text` is the final answer's text (empty unless completed).
    """

    run_id: str
    outcome: Literal["completed", "failed", "canceled"]
    text: str = ""
    reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    new_messages: list[Message] = Field(default_factory=list)


class ErrorBody(_Reply):
    """Every error the gateway answers: `error` names the problem; a body that does not
    validate also lists each problem (`details`: where, and what is wrong)."""

    error: str
    details: list[ErrorDetail] | None = None


class ErrorDetail(_Reply):
    """One problem of a request body: `loc` (the path to the field) and `msg`."""

    loc: list[str | int]
    msg: str


ErrorBody.model_rebuild()
