"""ClusterSubscription: a bounded subscription to an agent on a cluster node, read here.

The events are buffered on the node under the subscription's own bound and overflow policy
(a local `Subscription` there: `block` makes the agent's run wait for this reader, the drop
policies mark each gap with `EventsDropped`, `error` closes it), and one pump thread here
pulls them in batches (never one Ray call per event) into a buffer of the same bound, pulling
only as much as that buffer has room for. Guarantees:
- events arrive in the order the agent emitted them, each once;
- at most `2 * max_queue` events wait between the agent and the reader, so a slow reader
  applies the policy at the node exactly as it would locally;
- the node's loss ends every run of this agent that was running with one
  `Error(reason="node_lost")`; then, if the agent comes back (`transient`), the subscription
  goes on with the new incarnation's events, else it ends;
- `close()` unsubscribes on the node too; a reader blocked in iteration then stops after the
  buffered events.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any

import structlog

from agent_runtime._errors import StreamOverflow
from agent_runtime._key import AgentKey
from agent_runtime.cluster._host import ClusterHost
from agent_runtime.cluster._node import UNKNOWN_SUBSCRIPTION, Pulled
from agent_runtime.cluster._ray import get, node_failure
from agent_runtime.cluster._wire import RemoteError, decode_events
from agent_runtime.event_stream import OverflowPolicy
from agent_runtime.events import AgentStart, Error, Event, is_terminal

log = structlog.get_logger(__name__)

NODE_LOST = "node_lost"
"""The `Error.reason` a run gets when its node is lost mid-run."""

OVERFLOW_PREFIX = "subscriber_overflow"
PULL_WAIT = 0.5  # seconds a pull waits on the node for a first event: bounds close latency
PULL_TIMEOUT = 30.0  # seconds before a pull without an answer counts as a lost node
RELOCATE_TIMEOUT = 60.0  # seconds to wait for a lost transient agent to come back


class ClusterSubscription:
    """A subscription to one agent of a `ClusterRuntime` (see the module docstring).

    Iterate it (`for event in sub`) for every event until it is closed, or `until_end()` for
    one run; use it as a context manager to close it on exit.
    """

    def __init__(
        self,
        cluster: ClusterHost,
        key: AgentKey,
        *,
        max_queue: int,
        overflow: OverflowPolicy,
        block_timeout: float,
    ) -> None:
        self.agent = key
        self.max_queue = max_queue
        self.overflow = overflow
        self.block_timeout = block_timeout
        self._cluster = cluster
        self._cond = threading.Condition()
        self._buffer: collections.deque[Event] = collections.deque()
        self._end: str | None = None  # why it ended; None while open
        self._closing = False
        self._open_runs: set[str] = set()
        self._ended_runs: collections.deque[str] = collections.deque(maxlen=64)
        self._node, self._incarnation, self._sub_id = self._attach()
        self._pump = threading.Thread(
            target=self._run_pump, name=f"cluster-sub-{key.session}/{key.role}", daemon=True
        )
        self._pump.start()

    # -- the node side ------------------------------------------------------------------------

    def _attach(self) -> tuple[Any, str, str]:
        """Subscribe on the node that runs the agent now: (node, its incarnation, sub id).

        Raises:
            AgentStopped: no such agent; ValueError: a bad bound or policy (from the node).
        """
        node, incarnation = self._cluster._locate(self.agent)
        answer = get(
            node.subscribe.remote(self.agent, self.max_queue, self.overflow, self.block_timeout),
            PULL_TIMEOUT,
        )
        if isinstance(answer, RemoteError):
            raise answer.rebuild()
        return node, incarnation, str(answer)

    def expect(self, run_id: str) -> None:
        """Count `run_id` as running (its handle started it): a node loss ends it here."""
        with self._cond:
            if run_id not in self._ended_runs:
                self._open_runs.add(run_id)

    def _run_pump(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: self._closing or len(self._buffer) < self.max_queue, PULL_WAIT
                )
                if self._closing:
                    break
                room = self.max_queue - len(self._buffer)
            if room <= 0:
                continue
            try:
                pulled: Pulled = get(
                    self._node.pull.remote(self._sub_id, room, PULL_WAIT), PULL_TIMEOUT
                )
            except Exception as exc:
                if not (node_failure(exc) or isinstance(exc, TimeoutError)):
                    log.exception("cluster.subscription.pull_failed", agent=tuple(self.agent))
                if self._lost():
                    continue
                return
            self._take(decode_events(pulled.events), pulled.running)
            if pulled.end == UNKNOWN_SUBSCRIPTION:  # a new incarnation: the old one was lost
                if self._lost():
                    continue
                return
            if pulled.end is not None:
                self._finish(pulled.end)
                return
        with contextlib.suppress(Exception):
            self._node.unsubscribe.remote(self._sub_id)

    def _take(self, events: list[Event], running: str | None) -> None:
        with self._cond:
            for event in events:
                if event.agent == self.agent:
                    if isinstance(event, AgentStart):
                        self._open_runs.add(event.run_id)
                    elif is_terminal(event):
                        self._open_runs.discard(event.run_id)
                        self._ended_runs.append(event.run_id)
                self._buffer.append(event)
            if running is not None and running not in self._ended_runs:
                self._open_runs.add(running)
            self._cond.notify_all()

    def _lost(self) -> bool:
        """The node was lost: end its open runs with `node_lost`, then follow the agent to
        its next node; False (and the subscription ended) if it does not come back."""
        with self._cond:
            runs = sorted(self._open_runs)
            self._open_runs.clear()
            for run_id in runs:
                self._buffer.append(Error(agent=self.agent, run_id=run_id, reason=NODE_LOST))
                self._ended_runs.append(run_id)
            self._cond.notify_all()
        log.warning("cluster.subscription.node_lost", agent=tuple(self.agent), runs=runs)
        deadline = time.monotonic() + RELOCATE_TIMEOUT
        while time.monotonic() < deadline and not self._closing:
            where = self._cluster._whereabouts(self.agent, self._incarnation)
            if where == "gone":
                break
            if where == "moved":
                try:
                    self._node, self._incarnation, self._sub_id = self._attach()
                    return True
                except Exception:
                    log.debug("cluster.subscription.reattach_failed", agent=tuple(self.agent))
            time.sleep(0.1)
        self._finish("agent_lost")
        return False

    def _finish(self, end: str) -> None:
        with self._cond:
            if self._end is None:
                self._end = end
            self._cond.notify_all()

    # -- the reader side ----------------------------------------------------------------------

    @property
    def incarnation(self) -> str:
        """The incarnation of the node this subscription reads from now (it changes when it
        follows a recovered agent to its new node)."""
        return self._incarnation

    @property
    def closed(self) -> bool:
        """True once closed, ended by overflow or by the agent's end (buffered events may
        remain)."""
        return self._closing or self._end is not None

    def close(self) -> None:
        """Unsubscribe (here and on the node); idempotent."""
        with self._cond:
            self._closing = True
            if self._end is None:
                self._end = "unsubscribed"
            self._cond.notify_all()

    def _next(self, deadline: float | None) -> Event | None:
        """The next event; None at the end (buffer drained) or on timeout."""
        with self._cond:
            while not self._buffer:
                if self._end is not None:
                    return None
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left)
            return self._buffer.popleft()

    def _ended(self) -> bool:
        with self._cond:
            if self._buffer or self._end is None:
                return False
            if self._end.startswith(OVERFLOW_PREFIX):
                raise StreamOverflow(f"subscription closed: {self._end}")
            return True

    def __iter__(self) -> Iterator[Event]:
        """Events until the subscription is closed or ended.

        Raises:
            StreamOverflow: the subscription was closed because this reader fell behind.
        """
        while (event := self._next(None)) is not None:
            yield event
        self._ended()

    def until_end(
        self, timeout: float | None = None, *, run_id: str | None = None
    ) -> Iterator[Event]:
        """Events up to and including the end of the agent's next run (or of `run_id`).

        Raises:
            TimeoutError: the run did not end within `timeout` seconds.
            StreamOverflow: the subscription was closed because this reader fell behind.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            event = self._next(deadline)
            if event is None:
                if self._ended():
                    return
                raise TimeoutError("no event within the timeout")
            yield event
            if (
                is_terminal(event)
                and event.agent == self.agent
                and (run_id is None or event.run_id == run_id)
            ):
                return

    def __enter__(self) -> ClusterSubscription:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ClusterSubscription agent={tuple(self.agent)} closed={self.closed}>"
