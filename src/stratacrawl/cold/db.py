"""Connections to PostgreSQL: libpq URLs for psycopg, the schema's migrations (Alembic).

SQLAlchemy and Alembic are imported only when a migration has to run: together they cost
~2 s of CPU at import, which every ``stratacrawl`` process would otherwise pay at start.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from stratacrawl.errors import ConfigError, ServiceUnavailable

MIGRATIONS = Path(__file__).parent / "migrations"
_REVISION = re.compile(r'^revision = "([^"]+)"$', re.M)


def conninfo(url: str) -> dict[str, str]:
    """The connection parameters of a PostgreSQL URL in either libpq form — a URI
    (``postgresql://u:pw@h:5432/db?sslmode=require``, also with a SQLAlchemy
    ``+driver``) or ``key=value`` pairs (``host=h port=5432 dbname=db``) — parsed by libpq's
    own rules. Anything else is a :class:`ConfigError` naming the problem: never a silent
    fall back to libpq's defaults (another database on the same server)."""
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    from stratacrawl.redact import redact

    text = url.strip()
    scheme, sep, rest = text.partition("://")
    if sep:
        if scheme.split("+", 1)[0] not in ("postgresql", "postgres"):
            raise ConfigError(f"database URL {redact(text)!r}: scheme {scheme!r} is not "
                              "postgresql:// (or use libpq's key=value form)")
        text = f"postgresql://{rest}"
    elif "=" not in text:
        raise ConfigError(f"database URL {redact(text)!r}: neither a postgresql:// URI nor "
                          "libpq key=value pairs")
    try:
        params = {k: str(v) for k, v in conninfo_to_dict(text).items() if v is not None}
    except ProgrammingError as e:
        raise ConfigError(f"database URL {redact(text)!r}: {_scrubbed(str(e).strip(), text)}"
                          ) from None
    if not params.get("dbname"):
        raise ConfigError(f"database URL {redact(text)!r}: names no database (dbname)")
    return params


def _scrubbed(message: str, url: str) -> str:
    """A parser's message about ``url`` without what redaction hides in it: libpq quotes
    the token it could not read (``invalid percent-encoded token: "S3cret%PW"``), which
    may be the password, so every quoted piece of the URL that its redacted form lacks
    becomes ``***``."""
    import re

    from stratacrawl.redact import redact

    shown = redact(url)

    def hide(m: re.Match[str]) -> str:
        token = m.group(2)
        return m.group(0) if token not in url or token in shown else f"{m.group(1)}***{m.group(1)}"

    return redact(re.sub(r"([\"'])(.+?)\1", hide, message))


def libpq_url(url: str) -> str:
    """Any accepted database URL → libpq ``key=value`` conninfo (what psycopg takes)."""
    from psycopg.conninfo import make_conninfo

    return make_conninfo(**conninfo(url))


def with_database(url: str, name: str) -> str:
    """The same server and credentials, database ``name`` (libpq ``key=value`` form)."""
    from psycopg.conninfo import make_conninfo

    return make_conninfo(**{**conninfo(url), "dbname": name})


def sqlalchemy_url(url: str) -> str:
    """Any accepted database URL → the psycopg 3 dialect of SQLAlchemy, with the same
    database, user, host and options as :func:`libpq_url` (what Alembic and Great
    Expectations connect with)."""
    from sqlalchemy.engine import URL

    params = conninfo(url)
    database = params.pop("dbname")
    user, password = params.pop("user", None), params.pop("password", None)
    host, port = params.get("host"), params.get("port")
    # One TCP host goes in the URL; unix-socket folders and host lists stay libpq options.
    if host and not host.startswith("/") and "," not in host and (port is None or
                                                                   port.isdigit()):
        del params["host"]
        params.pop("port", None)
    else:
        host = port = None
    return URL.create("postgresql+psycopg", username=user, password=password, host=host,
                      port=int(port) if port else None, database=database,
                      query=params).render_as_string(hide_password=False)


def check(url: str, timeout_s: float = 5.0) -> str:
    """The server version, or :class:`ServiceUnavailable` naming PostgreSQL and the URL."""
    import psycopg

    from stratacrawl.redact import redact

    try:
        with psycopg.connect(libpq_url(url), connect_timeout=max(1, int(timeout_s))) as conn:
            row = conn.execute("SHOW server_version").fetchone()
    except psycopg.Error as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ServiceUnavailable("PostgreSQL", redact(url), reason) from None
    return str(row[0]) if row else "?"


def migrate(url: str, revision: str = "head") -> None:
    """Bring the schema to ``revision`` (Alembic, idempotent). A schema already at the
    newest revision is left alone without starting Alembic (one query)."""
    if revision == "head" and current_revision(url) == head_revision():
        return
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["url"] = sqlalchemy_url(url)
    command.upgrade(cfg, revision)


@cache
def head_revision() -> str:
    """The newest migration's revision: the migrations form one chain, numbered in order
    (``versions/NNNN_*.py``, each ``revision = "NNNN"``), so the highest is the head."""
    found = [m.group(1) for f in (MIGRATIONS / "versions").glob("*.py")
             if (m := _REVISION.search(f.read_text()))]
    return max(found)


def current_revision(url: str) -> str | None:
    """The schema's revision (None before the first migration)."""
    import psycopg

    with psycopg.connect(libpq_url(url), connect_timeout=10) as conn:
        table = conn.execute("SELECT to_regclass('alembic_version')").fetchone()
        if table is None or table[0] is None:
            return None
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return str(row[0]) if row else None


def ensure_database(admin_url: str, name: str) -> str:
    """The URL of database ``name`` on the server of ``admin_url``, created if missing."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                conn.execute(f'CREATE DATABASE "{name}"')
    return with_database(admin_url, name)


async def row_counts(url: str, tables: Sequence[str]) -> dict[str, int]:
    """Rows of each of these tables (exact counts: for inventories, not for hot paths)."""
    import psycopg

    out: dict[str, int] = {}
    async with await psycopg.AsyncConnection.connect(libpq_url(url)) as conn:
        for table in tables:
            row = await (await conn.execute(f"SELECT count(*) FROM {table}")).fetchone()
            out[table] = int(row[0]) if row else 0
    return out


def recreate_database(admin_url: str, name: str) -> str:
    """Database ``name`` dropped (with any sessions on it) and made anew; its URL."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return with_database(admin_url, name)
