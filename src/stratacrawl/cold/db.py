"""Connections to PostgreSQL: SQLAlchemy engines for general use, libpq URLs for psycopg COPY paths."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, create_engine, text

from stratacrawl.errors import ServiceUnavailable

MIGRATIONS = Path(__file__).parent / "migrations"


def libpq_url(url: str) -> str:
    """``postgresql+psycopg://…`` → ``postgresql://…`` (what psycopg.connect takes)."""
    scheme, _, rest = url.partition("://")
    return f"postgresql://{rest}" if scheme.startswith("postgres") else url


def sqlalchemy_url(url: str) -> str:
    """Any PostgreSQL URL → the psycopg 3 dialect of SQLAlchemy."""
    return "postgresql+psycopg://" + libpq_url(url).partition("://")[2]


def engine(url: str, **kwargs: object) -> Engine:
    return create_engine(sqlalchemy_url(url), pool_pre_ping=True, **kwargs)  # type: ignore[arg-type]


def check(url: str, timeout_s: float = 5.0) -> str:
    """The server version, or :class:`ServiceUnavailable` naming PostgreSQL and the URL."""
    import psycopg

    from stratacrawl.services.resolve import redact

    try:
        with psycopg.connect(libpq_url(url), connect_timeout=max(1, int(timeout_s))) as conn:
            row = conn.execute("SHOW server_version").fetchone()
    except psycopg.Error as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ServiceUnavailable("PostgreSQL", redact(url), reason) from None
    return str(row[0]) if row else "?"


def migrate(url: str, revision: str = "head") -> None:
    """Bring the schema to ``revision`` (Alembic, idempotent)."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["url"] = sqlalchemy_url(url)
    command.upgrade(cfg, revision)


def current_revision(url: str) -> str | None:
    eng = engine(url)
    try:
        with eng.connect() as c:
            exists = c.execute(text("SELECT to_regclass('alembic_version')")).scalar()
            if not exists:
                return None
            return c.execute(text("SELECT version_num FROM alembic_version")).scalar()
    finally:
        eng.dispose()
