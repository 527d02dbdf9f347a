"""Library loggers, quiet until the application asks: structlog's once structlog is
configured, the standard library's `logging` until then."""

from __future__ import annotations

import logging
from typing import Any

import structlog

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
}

# The wrapper classes of `structlog.make_filtering_bound_logger(level)` (one per level), and
# the level each logs from: with one of them configured, whether a call is logged is known
# without binding a logger (binding one costs ~4 us, and the hot path asks per run).
_FILTERING_LEVELS: dict[Any, int] = {
    structlog.make_filtering_bound_logger(level): level
    for level in (
        logging.NOTSET,
        logging.DEBUG,
        logging.INFO,
        logging.WARNING,
        logging.ERROR,
        logging.CRITICAL,
    )
}


def _filtering_level() -> int | None:
    """The level from which structlog's configured logger logs, when it is a filtering bound
    logger (`make_filtering_bound_logger`); None for any other wrapper class."""
    return _FILTERING_LEVELS.get(structlog.get_config()["wrapper_class"])


class LibraryLogger:
    """A module's logger (`log = get_logger(__name__)`), used like structlog's: an event name
    and key-values per call, `bind(**values)` for a logger carrying them.

    Guarantees:
    - While structlog is configured (by the application, or by
      `agent_runtime.telemetry.configure_logging`, which `Runtime.start(configure_logging=True)`
      and the CLI call), every call goes to structlog as `structlog.get_logger(name)` would.
    - Until then nothing is printed by this library on its own: the call goes to the standard
      library's logger `name` as one line, `event key=value ...`. With no `logging`
      configuration Python shows only warnings and errors, on stderr (its last-resort
      handler); an application's `logging` configuration decides the rest. (Unconfigured
      structlog would print every level to stdout.)
    """

    __slots__ = ("_context", "_name", "_structlog")

    def __init__(self, name: str, context: dict[str, Any] | None = None) -> None:
        self._name = name
        self._context = context or {}
        # Made at the first line logged through structlog: a logger bound per agent (and a
        # run's) costs three objects that most agents never use.
        self._structlog: Any = None

    def bind(self, **values: Any) -> LibraryLogger:
        """This logger with `values` added to every event it logs."""
        return LibraryLogger(self._name, {**self._context, **values})

    def is_enabled_for(self, level: int) -> bool:
        """Whether a call at `level` (a `logging` level) would be logged: the hot path asks
        before it prepares debug lines."""
        if structlog.is_configured():
            least = _filtering_level()
            if least is not None:
                return level >= least
            bound = self._bound().bind()
            # Looked up on the class: structlog's generic BoundLogger answers any attribute
            # (as a log method of its logger), so it has no level check to ask.
            if getattr(type(bound), "is_enabled_for", None) is None:
                return True
            return bool(bound.is_enabled_for(level))
        return _stdlib_logger(self._name).isEnabledFor(level)

    def _bound(self) -> Any:
        bound = self._structlog
        if bound is None:
            bound = self._structlog = structlog.get_logger(self._name, **self._context)
        return bound

    def debug(self, event: str, **values: Any) -> None:
        self._log("debug", event, values)

    def info(self, event: str, **values: Any) -> None:
        self._log("info", event, values)

    def warning(self, event: str, **values: Any) -> None:
        self._log("warning", event, values)

    def error(self, event: str, **values: Any) -> None:
        self._log("error", event, values)

    def exception(self, event: str, **values: Any) -> None:
        """An error with the exception being handled (its traceback)."""
        self._log("exception", event, values)

    def _log(self, method: str, event: str, values: dict[str, Any]) -> None:
        if structlog.is_configured():
            least = _filtering_level()
            if least is None or _LEVELS[method] >= least:
                getattr(self._bound(), method)(event, **values)
            return
        logger = _stdlib_logger(self._name)
        level = _LEVELS[method]
        if logger.isEnabledFor(level):
            exc_info = values.pop("exc_info", method == "exception")
            fields = " ".join(
                f"{key}={value!r}" for key, value in {**self._context, **values}.items()
            )
            logger.log(level, "%s %s", event, fields, exc_info=exc_info)


# The standard library's logger of each name, looked up once: `logging.getLogger` takes the
# logging module's lock on every call, and the hot path logs (or asks) a few times per run.
# Safe to keep: `logging` never replaces the logger of a name once made.
_STDLIB_LOGGERS: dict[str, logging.Logger] = {}


def _stdlib_logger(name: str) -> logging.Logger:
    logger = _STDLIB_LOGGERS.get(name)
    if logger is None:
        logger = _STDLIB_LOGGERS.setdefault(name, logging.getLogger(name))
    return logger


def get_logger(name: str) -> LibraryLogger:
    """The logger of module `name` (see `LibraryLogger`)."""
    return LibraryLogger(name)
