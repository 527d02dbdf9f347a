"""How a PostgresStore shows its DSN: without the password, in every form a DSN can hold one."""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg", reason="psycopg 3 is not installed: pip install -e '.[postgres]'")

from psycopg.conninfo import conninfo_to_dict

from agent_runtime.memory._postgres_dsn import parse


@pytest.mark.parametrize(
    ("conninfo", "password", "display"),
    [
        (
            "postgresql://agent:s3cr%40t@db:6432/agents?sslmode=require",
            "s3cr@t",
            "postgresql://agent@db:6432/agents?sslmode=require",
        ),
        (
            "host=db user=agent password='top secret' dbname=agents",
            "top secret",
            "postgresql://agent@db/agents",
        ),
        (
            "postgresql://agent@db/agents?password=in-query&application_name=x",
            "in-query",
            "postgresql://agent@db/agents?application_name=x",
        ),
        ("postgres://u:pw9@[::1]:5432/d", "pw9", "postgresql://u@[::1]:5432/d"),
        ("dbname=agents", None, "postgresql:///agents"),
    ],
)
def test_the_display_form_drops_the_password_and_redact_scrubs_it(
    conninfo: str, password: str | None, display: str
) -> None:
    dsn = parse(conninfo, conninfo_to_dict)
    assert dsn.display == display
    assert dsn.params.get("password") == password
    assert conninfo not in repr(dsn)
    if password is not None:
        assert password not in repr(dsn)
        said = f'FATAL: password "{password}" and {conninfo} refused'
        assert password not in dsn.redact(said)
        assert "***" in dsn.redact(said)


@pytest.mark.parametrize(
    ("conninfo", "secret"),
    [
        ("postgresql://agent:sec ret@db/agents", "sec ret"),
        ("host=db password='it''s a secret' user", "s a secret"),
        ("host=db password=abc def", "abc"),
    ],
)
def test_a_dsn_that_does_not_parse_is_reported_without_its_password(
    conninfo: str, secret: str
) -> None:
    with pytest.raises(ValueError) as caught:
        parse(conninfo, conninfo_to_dict)
    assert secret not in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
