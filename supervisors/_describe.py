"""describe(exc): an exception as "Type: message" for logs and exit reasons, whatever it is."""

from __future__ import annotations


def describe(exc: BaseException) -> str:
    """`"Type: message"`; never raises.

    The exceptions described here come from code the supervisors run (children, tasks), so
    their `__str__` is that code too: one that raises is described as unreadable instead of
    failing the supervisor that reports it.
    """
    kind = type(exc).__name__
    try:
        message = str(exc)
    except BaseException as failure:
        message = f"<message unreadable: __str__ raised {type(failure).__name__}>"
    return f"{kind}: {message}"
