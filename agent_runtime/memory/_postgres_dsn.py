"""A PostgreSQL DSN as a `PostgresStore` shows it: without its password, anywhere."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlencode

# Where a password can sit in a DSN that may not even parse: the user info of a URI
# (`postgresql://user:secret@host`), a `password=` of its query, or a `password=` keyword
# (quoted or not) of a key/value string.
_URI_USERINFO = re.compile(r"^\s*[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)@")
_URI_QUERY = re.compile(r"[?&]password=([^&#]*)")
_KEYWORD = re.compile(r"\bpassword\s*=\s*('(?:\\.|[^'\\])*'?|\S*)")

_QUOTED = re.compile(r'"[^"]*"')

REDACTED = "***"

ConninfoParser = Callable[[str], Mapping[str, Any]]
"""psycopg's `conninfo_to_dict`: a DSN to its parameters (`ProgrammingError` if malformed)."""


@dataclass(frozen=True)
class Dsn:
    """A DSN (libpq key/value string or `postgresql://` URI), split into what may be shown
    and what must not.

    `display` is the DSN without its password: `postgresql://user@host:port/dbname?...`, the
    other parameters sorted in the query. `redact(text)` replaces every form of the password
    found in the DSN (as written, percent-decoded, unquoted) by `***`, for texts that came
    from elsewhere (the driver's or the server's messages). `repr()` shows only `display`.
    """

    conninfo: str = field(repr=False)
    display: str
    params: dict[str, str] = field(repr=False)
    secrets: tuple[str, ...] = field(repr=False)

    def redact(self, text: str) -> str:
        """`text` with every form of the DSN's password replaced by `***`."""
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return text


def secrets_in(conninfo: str, params: dict[str, str] | None = None) -> tuple[str, ...]:
    """Every form of a password that `conninfo` holds, longest first (so no shorter form
    leaves part of a longer one visible). `params` is the parsed DSN, when it parses."""
    found: set[str] = set()
    if params and params.get("password"):
        found.add(params["password"])
    userinfo = _URI_USERINFO.match(conninfo)
    if userinfo and ":" in userinfo.group(1):
        found.add(userinfo.group(1).split(":", 1)[1])
    found.update(m.group(1) for m in _URI_QUERY.finditer(conninfo))
    for match in _KEYWORD.finditer(conninfo):
        value = match.group(1)
        found.add(value)
        if value.startswith("'"):
            found.add(value.strip("'").replace("\\'", "'").replace("\\\\", "\\"))
    found |= {unquote(value) for value in found}
    return tuple(sorted((s for s in found if s), key=len, reverse=True))


def display_of(params: dict[str, str]) -> str:
    """`params` (a parsed DSN) as a `postgresql://` URI without the password."""
    user = params.get("user")
    host = params.get("host", "")
    if ":" in host and "," not in host and not host.startswith("/"):
        host = f"[{host}]"  # an IPv6 address
    netloc = (quote(user, safe="") + "@" if user else "") + host
    if params.get("port"):
        netloc += ":" + params["port"]
    dbname = params.get("dbname")
    path = "/" + quote(dbname, safe="") if dbname else ""
    rest = {k: v for k, v in sorted(params.items()) if k not in _IN_URI}
    query = "?" + urlencode(rest) if rest else ""
    return f"postgresql://{netloc}{path}{query}"


_IN_URI = frozenset({"user", "password", "host", "port", "dbname"})


def parse(conninfo: str, to_dict: ConninfoParser) -> Dsn:
    """`conninfo` as a `Dsn`, parsed with `to_dict` (psycopg's `conninfo_to_dict`).

    Raises:
        ValueError: it does not parse; the message is the parser's, redacted.
    """
    try:
        params = {str(k): str(v) for k, v in to_dict(conninfo).items() if v is not None}
    except Exception as exc:
        text = " ".join(str(exc).split())
        for secret in secrets_in(conninfo):
            text = text.replace(secret, REDACTED)
        if "password" in conninfo or _URI_USERINFO.match(conninfo):
            # The parser quotes the token it choked on, which may be part of a password the
            # patterns above could not delimit (a malformed quote): withhold every quote.
            text = _QUOTED.sub(lambda m: m.group(0) if m.group(0) == '"="' else '"***"', text)
        raise ValueError(text) from None
    return Dsn(conninfo, display_of(params), params, secrets_in(conninfo, params))
