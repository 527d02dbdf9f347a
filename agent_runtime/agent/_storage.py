"""An agent's storage work, done off the event loop: on the caller's thread at start, else on
the session writer's threads, in the session's order (`SessionWriter.submit`)."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from agent_runtime._key import AgentKey
from agent_runtime.agent._history import (
    PENDING_PROMPTS,
    pending_prompt_key,
    repaired,
    with_pending_prompt,
)
from agent_runtime.memory import MemoryPolicy, SessionMemory, window
from agent_runtime.messages import Message
from agent_runtime.templates import PromptTemplates, Template

History = tuple[tuple[Message, ...], int, tuple[Message, ...]]
"""An agent's history as read from its session: its messages, the stored sequence, and the
kept prompt at its end that is not in the session's memory yet (see `read_history`)."""


def read_history(
    memory: SessionMemory, key: AgentKey, policy: MemoryPolicy, reason: str
) -> History:
    """The history an incarnation starts from: the session's, within the policy's window,
    then the prompt the agent had accepted whose turn never committed, with every call
    left unpaired answered `outcome="unknown"`; empty when the policy does not read. The
    third item is that prompt (empty without one): the next run commits it with its first
    turn, in its place before the run's own messages. An agent that writes and does not
    read starts from that prompt alone."""
    if not policy.read:
        if not policy.write:
            return (), 0, ()
        pending = memory.kv(PENDING_PROMPTS).get(pending_prompt_key(*key))
        if not pending:
            return (), 0, ()
        # Read only to see whether its turn committed after all (then nothing is kept).
        stored = list(memory.history(key.session).messages)
        _, kept = with_pending_prompt(stored, pending, reason)
        return tuple(repaired(list(kept), reason)), 0, kept
    history = memory.history(key.session)
    messages = window(history.messages, policy.last_n, policy.max_bytes)
    unstored: tuple[Message, ...] = ()
    if policy.write:
        pending = memory.kv(PENDING_PROMPTS).get(pending_prompt_key(*key))
        messages, unstored = with_pending_prompt(messages, pending, reason)
    return tuple(repaired(messages, reason)), history.sequence, unstored


def prepare_run(
    memory: SessionMemory,
    key: AgentKey,
    prompts: Sequence[Message] | None,
    since: int | None,
    template: Template | None,
    reset_at: Future[int] | None = None,
) -> tuple[str | None, Any, int | None]:
    """A run's storage work before its first model call, in one go: render its `template`
    system prompt (a TemplateError is raised before anything is written), keep its prompt
    (`prompts`, when its policy writes) until its turn commits, and read what the
    session's other agents committed since `since` (when its policy reads), or, after a
    reset, since where the reset left the session (`reset_at`, read earlier in the
    session's order: done by now).

    Returns the rendered prompt (None without a template), the changes (None without
    `since`) and the sequence they were read from after a reset (else None)."""
    rendered = None if template is None else PromptTemplates.of(memory).render(template)
    if prompts:
        kept = [m.model_dump(mode="json") for m in prompts]
        memory.kv(PENDING_PROMPTS).put(pending_prompt_key(*key), kept)
    if since is None:
        return rendered, None, None
    reset = None
    if reset_at is not None and reset_at.done() and reset_at.exception() is None:
        since = reset = reset_at.result()
    return rendered, memory.changes(key.session, since), reset


def session_sequence(memory: SessionMemory, session: str) -> int:
    """Where `session` stands now (its sequence), without writing anything."""
    return memory.append(session, ())


def forget_prompt(memory: SessionMemory, key: AgentKey) -> None:
    """The turn of the kept prompt committed: it is in the session's history now."""
    memory.kv(PENDING_PROMPTS).delete(pending_prompt_key(*key))
