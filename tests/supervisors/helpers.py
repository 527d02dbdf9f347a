"""A worker actor that records its life, child specs for it, and small supervision helpers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pykka

from agent_runtime.testing import wait_until
from supervisors import ChildSpec, ExitReason, SupervisedActor, kill
from supervisors._core import SupervisorHandle

# How long a blocked worker waits on a gate the test never opens; fixtures open every gate at
# the end of the test, so this only bounds a thread that something else forgot.
GATE_TIMEOUT = 30.0

Event = tuple[str, str]


class Recorder:
    """A thread-safe, ordered log of `(what, who)` events, shared by a test and its actors."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[Event] = []

    def add(self, what: str, who: str) -> None:
        with self._lock:
            self._events.append((what, who))

    def events(self, *kinds: str, since: int = 0) -> list[Event]:
        """Events from index `since` on, only of the given kinds (all kinds if none given)."""
        with self._lock:
            events = self._events[since:]
        return [e for e in events if not kinds or e[0] in kinds]

    def mark(self) -> int:
        """The index of the next event: pass it as `since` to see what happened after now."""
        with self._lock:
            return len(self._events)

    def count(self, what: str, who: str) -> int:
        with self._lock:
            return self._events.count((what, who))


@dataclass(frozen=True)
class Raise:
    """Tell a Worker to raise `exc` from its handler."""

    exc: BaseException


@dataclass(frozen=True)
class Block:
    """Tell a Worker to block its handler until `gate` is set."""

    gate: threading.Event


PING = "ping"


class Worker(SupervisedActor):
    """A child that records `start`, `stop` and `exit` into a Recorder.

    `fail_on_start()` decides, at each start, whether `on_start` raises; `stop_gate` makes
    `on_stop` block until it is set (then it records `stopped`); `keep` holds the actor object
    so that it outlives its thread (pykka refs hold actors weakly).
    """

    def __init__(
        self,
        name: str,
        recorder: Recorder,
        *,
        fail_on_start: Callable[[], bool] | None = None,
        stop_gate: threading.Event | None = None,
        keep: list[Worker] | None = None,
    ) -> None:
        super().__init__()
        self.name = name
        self.recorder = recorder
        self.fail_on_start = fail_on_start
        self.stop_gate = stop_gate
        if keep is not None:
            keep.append(self)

    def on_start(self) -> None:
        self.recorder.add("start", self.name)
        if self.fail_on_start is not None and self.fail_on_start():
            raise RuntimeError(f"{self.name} failed in on_start")

    def on_stop(self) -> None:
        self.recorder.add("stop", self.name)
        if self.stop_gate is not None:
            self.stop_gate.wait(timeout=GATE_TIMEOUT)
            self.recorder.add("stopped", self.name)

    def on_exit(self, reason: ExitReason) -> None:
        self.recorder.add("exit", self.name)

    def on_receive(self, message: Any) -> Any:
        if message == PING:
            return "pong"
        if isinstance(message, Raise):
            raise message.exc
        if isinstance(message, Block):
            message.gate.wait(timeout=GATE_TIMEOUT)
            return None
        return super().on_receive(message)


def worker_spec(
    child_id: str,
    recorder: Recorder,
    *,
    restart: str = "permanent",
    shutdown: float | str = 5.0,
    handshake: bool = True,
    fail_on_start: Callable[[], bool] | None = None,
    stop_gate: threading.Event | None = None,
) -> ChildSpec:
    """A ChildSpec starting a Worker named `child_id`.

    With `handshake` the start function returns only once `on_start` has run (it pings the
    actor), as OTP's `start_link` returns after `init/1`; an `on_start` failure then makes the
    start function itself fail. Without it, `on_start` runs after `start` has returned.
    """

    def start() -> pykka.ActorRef[Any]:
        ref = Worker.start(child_id, recorder, fail_on_start=fail_on_start, stop_gate=stop_gate)
        if handshake:
            ref.ask(PING, timeout=5.0)
        return ref

    return ChildSpec.model_validate(
        {"id": child_id, "start": start, "restart": restart, "shutdown": shutdown}
    )


def ref_of(sup: SupervisorHandle, child_id: str) -> pykka.ActorRef[Any] | None:
    """The current ref of the child `child_id` (None while it is not running)."""
    for info in sup.which_children():
        if info.id == child_id:
            return info.ref
    raise KeyError(child_id)


def live_ref(sup: SupervisorHandle, child_id: str) -> pykka.ActorRef[Any]:
    ref = ref_of(sup, child_id)
    assert ref is not None and ref.is_alive(), f"child {child_id!r} is not running"
    return ref


def child_ids(sup: SupervisorHandle) -> list[str]:
    return [info.id for info in sup.which_children()]


def make_exit(ref: pykka.ActorRef[Any], how: str) -> None:
    """End a child one of the three ways: `stop` (normal), `crash` (tell handler), `kill`."""
    if how == "stop":
        ref.stop(block=True, timeout=5.0)
    elif how == "crash":
        ref.tell(Raise(RuntimeError("boom")))
    elif how == "kill":
        kill(ref)
    else:
        raise ValueError(how)


def wait_for_restart(sup: SupervisorHandle, child_id: str, old: pykka.ActorRef[Any]) -> None:
    """Wait until the supervisor runs a new instance of `child_id` in place of `old`.

    `which_children()` is answered after the supervisor finished handling the exit, so when
    this returns the whole restart (every child of the strategy's group) is done.
    """

    def replaced() -> bool:
        ref = ref_of(sup, child_id)
        return ref is not None and ref is not old and ref.is_alive()

    wait_until(replaced, what=f"{child_id} restarted")


class FakeClock:
    """A monotonic clock the test moves by hand (restart intensity reads it)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
