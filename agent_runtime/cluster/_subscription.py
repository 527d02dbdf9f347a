"""ClusterSubscription: a bounded subscription to an agent on a cluster node, read here.

The events are buffered on the node under the subscription's own bound and overflow policy
(a local `Subscription` there: `block` makes the agent's run wait for this reader, the drop
policies mark each gap with `EventsDropped`, `error` closes it), and pulled from there in
batches by this process's `Feed`. Guarantees:
- events arrive in the order the agent emitted them, each once;
- at most `2 * max_queue` events wait between the agent and the reader, so a slow reader
  meets the overflow policy at the node exactly as it would locally;
- the node's loss ends every run of this agent that was running with one
  `Error(reason="node_lost")`; then, if the agent comes back (`transient`), the subscription
  goes on with the new incarnation's events, else it ends;
- `close()` (or leaving the `with` block, or dropping the object) unsubscribes on the node
  too; a reader blocked in iteration then stops after the buffered events.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import TracebackType

from agent_runtime._key import AgentKey
from agent_runtime.cluster._feed import NODE_LOST, Feed
from agent_runtime.cluster._host import ClusterHost
from agent_runtime.event_stream import OverflowPolicy
from agent_runtime.events import Event, is_terminal

__all__ = ["NODE_LOST", "ClusterSubscription"]


class ClusterSubscription:
    """A subscription to one agent of a `ClusterRuntime` (see the module docstring).

    Iterate it (`for event in sub`) for every event until it is closed, or `until_end()` for
    one run; use it as a context manager to close it on exit.

    Raises (from the constructor):
        AgentStopped: no agent runs under the key.
        ValueError: `max_queue < 1`, an unknown policy or `block_timeout <= 0`.
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
        self._feed = Feed(cluster, key, max_queue, overflow, block_timeout)

    @property
    def incarnation(self) -> str:
        """The incarnation of the node this subscription reads from now (it changes when it
        follows a recovered agent to its new node)."""
        return self._feed.incarnation

    @property
    def closed(self) -> bool:
        """True once closed, ended by overflow or by the agent's end (buffered events may
        remain)."""
        return self._feed.closed

    def expect(self, run_id: str) -> None:
        """Count `run_id` as running (the caller started it): if the node is lost before the
        run's first event arrived, the run still gets its `Error("node_lost")` here."""
        self._feed.expect(run_id)

    def close(self) -> None:
        """Unsubscribe (here and on the node); idempotent."""
        self._feed.close()

    def __iter__(self) -> Iterator[Event]:
        """Events until the subscription is closed or ended.

        Raises:
            StreamOverflow: the subscription was closed because this reader fell behind.
        """
        while (event := self._feed.next(None)) is not None:
            yield event
        self._feed.drained()

    def until_end(
        self, timeout: float | None = None, *, run_id: str | None = None
    ) -> Iterator[Event]:
        """Events up to and including the end of the agent's next run (or of `run_id`);
        events after it stay buffered for the next read.

        Raises:
            TimeoutError: the run did not end within `timeout` seconds.
            StreamOverflow: the subscription was closed because this reader fell behind.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            event = self._feed.next(deadline)
            if event is None:
                if self._feed.drained():
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

    def __del__(self) -> None:
        # A forgotten subscription must not hold its agent's runs (under "block") on the node.
        feed = getattr(self, "_feed", None)
        if feed is not None:
            feed.close()

    def __repr__(self) -> str:
        return f"<ClusterSubscription agent={tuple(self.agent)} closed={self.closed}>"
