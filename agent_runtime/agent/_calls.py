"""ActorCalls: how an Agent handle sends its calls to the current actor of its agent."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
from typing import Any, Literal

import pykka

from agent_runtime._errors import AgentStopped
from agent_runtime._loop_guard import refuse_on_loop
from agent_runtime.agent._messages import Call, Fact
from agent_runtime.agent._shell import AgentShell, IncarnationExited
from supervisors import on_event_loop_thread

# An actor answers every call at once (no handler waits on the loop or on another agent); this
# bounds a call to an actor that is wedged in a bug.
CALL_TIMEOUT = 30.0
# How long a call waits for a crashed `transient` agent's next incarnation (it returns at once
# when the agent ends for good instead).
RESTART_WAIT = 30.0
# Calls that can be sent again to the next incarnation when the actor died before answering
# (doing them twice is doing them once); any other such call raises AgentStopped.
IDEMPOTENT = frozenset(
    {"state", "idle_future", "subscribe", "abort", "reset", "set_system_prompt", "set_model"}
    | {"set_tools", "set_mode"}
)


class ActorCalls:
    """Calls to whichever actor is the agent's current incarnation (thread-safe)."""

    def __init__(self, shell: AgentShell) -> None:
        self._shell = shell
        self.key = shell.key

    # -- messages to the actor --------------------------------------------------------------------

    def send(
        self, name: str, args: tuple[Any, ...], *, wait: bool = True, hold: bool = False
    ) -> Any:
        """Send a call to the current actor; returns its reply future, or None if no actor
        runs right now and `wait` is False. `hold`: nobody waits on the reply, so the shell
        keeps it until it is settled (an actor's exit still fails it).

        Raises:
            AgentStopped: the agent ended (or did not come back within RESTART_WAIT).
        """
        shell = self._shell
        deadline = time.monotonic() + RESTART_WAIT
        while True:
            if shell.stopped:
                raise AgentStopped(shell.key)
            ref = shell.ref
            if ref is not None:
                reply = shell.new_reply(hold=hold)
                try:
                    ref.tell(Call(name, args, reply))
                    return reply
                except pykka.ActorDeadError:
                    shell.forget_reply(reply)
            if not wait:
                return None
            if not shell.wait_replaced(ref, max(deadline - time.monotonic(), 0.0)):
                raise AgentStopped(shell.key)

    def call(self, name: str, *args: Any) -> Any:
        """A call answered by the actor. On the event-loop thread it never waits for a
        restarting agent (AgentStopped instead); the actor itself answers at once."""
        on_loop = self.on_loop_thread()
        for _ in range(3):
            reply = self.send(name, args, wait=not on_loop)
            if reply is None:
                raise AgentStopped(self.key)
            try:
                return reply.result(CALL_TIMEOUT)
            except IncarnationExited:
                if name not in IDEMPOTENT:
                    raise AgentStopped(self.key) from None
            except concurrent.futures.TimeoutError:
                raise TimeoutError(
                    f"agent {tuple(self.key)!r} did not answer {name} within {CALL_TIMEOUT}s"
                ) from None
        raise AgentStopped(self.key)

    async def acall(self, name: str, *args: Any) -> Any:
        """`_call` for asyncio callers: it never blocks their event loop."""
        deadline = time.monotonic() + RESTART_WAIT
        for _ in range(3):
            while (reply := self.send(name, args, wait=False)) is None:
                if time.monotonic() > deadline:
                    raise AgentStopped(self.key)
                await asyncio.sleep(0.01)
            try:
                # Shielded: a caller that stops waiting leaves the call to finish on its own.
                return await asyncio.wait_for(
                    asyncio.shield(asyncio.wrap_future(reply)), CALL_TIMEOUT
                )
            except IncarnationExited:
                if name not in IDEMPOTENT:
                    raise AgentStopped(self.key) from None
        raise AgentStopped(self.key)

    def tell(self, name: str, *args: Any) -> None:
        """Send a call without waiting for its answer (from the actor or the event loop).

        Raises:
            AgentStopped: the agent ended, or is between incarnations right now.
        """
        if self.send(name, args, wait=False) is None:
            raise AgentStopped(self.key)

    def on_loop_thread(self) -> bool:
        """True on a runtime's event-loop thread (this runtime's or another's), where a
        call must not wait."""
        return on_event_loop_thread()

    def refuse_on_loop(
        self, what: str, instead: str, *, on_host_loop: Literal["raise", "warn"] = "raise"
    ) -> None:
        """RuntimeError naming `instead` (the async twin) when called on a loop thread (a
        warning instead on an application's loop, with `on_host_loop="warn"`)."""
        refuse_on_loop(what, instead, on_host_loop=on_host_loop)

    def tell_fact(self, name: str, *args: Any) -> None:
        ref = self._shell.ref
        if ref is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(Fact(name, args))
