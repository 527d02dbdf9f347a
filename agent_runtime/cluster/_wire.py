"""What crosses between the caller and a node: events as JSON, errors by value, options pickled.

Guarantees:
- a batch of events decodes to equal events in the same order (they are pydantic models that
  round-trip through JSON, so a node and a caller need only agree on agent_runtime's version);
- an exception raised on a node is raised on the caller with its class, message and facts
  (`reason`, `partial`, `key`, `run_id`, ...): the library's exceptions keep their facts in
  attributes their constructors do not take back, so they travel as (class, args, attributes);
- options that cannot be pickled fail on the caller, before any node is asked, with a
  `TypeError` naming the tool (or the option) at fault.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter

from agent_runtime.cluster._ray import import_ray
from agent_runtime.events import Event

_BATCH: TypeAdapter[list[Event]] = TypeAdapter(list[Event])

IMPORTABLE = (
    "define it at module level in a module every node can import (the cluster's nodes "
    "unpickle tools and models by reference), without locks, sockets or open files"
)


def encode_events(events: list[Event]) -> bytes:
    """One batch of events as JSON."""
    return _BATCH.dump_json(events)


def decode_events(data: bytes) -> list[Event]:
    """The events of `encode_events`, in order."""
    return _BATCH.validate_json(data)


@dataclass(frozen=True)
class RemoteError:
    """An exception raised on a node, carried back by value."""

    kind: type[BaseException]
    args: tuple[Any, ...]
    attributes: dict[str, Any]

    @classmethod
    def of(cls, exc: BaseException) -> RemoteError:
        """`exc` as it travels; attributes that cannot be pickled (a local Agent handle as
        `AlreadyRegistered.holder`) arrive as None."""
        attributes = {name: _picklable(value) for name, value in vars(exc).items()}
        args = tuple(_picklable(arg) for arg in exc.args)
        kind = type(exc) if _picklable(type(exc)) is not None else RuntimeError
        return cls(kind, args, attributes)

    def rebuild(self) -> BaseException:
        """The exception again, with its class, message and attributes (a `RuntimeError`
        naming the class, for one that cannot be rebuilt that way)."""
        try:
            exc = self.kind.__new__(self.kind)
            BaseException.__init__(exc, *self.args)
            vars(exc).update(self.attributes)
        except Exception:
            return RuntimeError(f"{self.kind.__name__} on a cluster node: {self.args}")
        return exc


def _picklable(value: Any) -> Any:
    """`value` if it pickles, else None (a node-local object, such as an Agent handle)."""
    try:
        pickle.dumps(value)
    except Exception:
        return None
    return value


def pack_options(options: Mapping[str, Any]) -> bytes:
    """`start_agent`'s options, pickled for a node (Ray's cloudpickle).

    Raises:
        TypeError: a tool, the model or another option cannot be pickled; the message names
            it and says how to make it travel.
    """
    cloudpickle = import_ray().cloudpickle
    try:
        return bytes(cloudpickle.dumps(dict(options)))
    except Exception as exc:
        raise TypeError(_culprit(cloudpickle, options, exc)) from exc


def unpack_options(data: bytes) -> dict[str, Any]:
    """The options of `pack_options`."""
    options: dict[str, Any] = pickle.loads(data)
    return options


def _culprit(cloudpickle: Any, options: Mapping[str, Any], exc: Exception) -> str:
    for tool in options.get("tools") or ():
        try:
            cloudpickle.dumps(tool)
        except Exception as tool_exc:
            name = getattr(tool, "name", getattr(tool, "__name__", repr(tool)))
            return (
                f"tool {name!r} cannot be sent to a cluster node: it is not picklable "
                f"({tool_exc}); {IMPORTABLE}"
            )
    for option, value in options.items():
        try:
            cloudpickle.dumps(value)
        except Exception as option_exc:
            what = "the model" if option == "model" else f"option {option!r}"
            return (
                f"{what} ({type(value).__name__}) cannot be sent to a cluster node: it is not "
                f"picklable ({option_exc}); {IMPORTABLE}, or give it a __reduce__"
            )
    return f"the agent's options cannot be sent to a cluster node: {exc}"
