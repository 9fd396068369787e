"""Alembic environment: the URL comes from the caller (``stratacrawl.cold.db.migrate``)."""

from alembic import context
from sqlalchemy import create_engine, pool

MIGRATION_LOCK = 734201

url = str(context.config.attributes.get("url") or context.config.get_main_option("sqlalchemy.url"))
connectable = create_engine(url, poolclass=pool.NullPool)
with connectable.connect() as connection:
    # Serialize concurrent migrators (several processes starting on a fresh database at
    # once). The lock is the session's; it is taken and that statement committed before
    # any migration runs, and each migration commits before the lock is let go — so the
    # next migrator, once it holds the lock, reads the version table as the last one
    # left it and finds nothing to do. (Unlocking before the commit let a second
    # process run the first migration again: "relation tasks already exists".)
    connection.exec_driver_sql(f"SELECT pg_advisory_lock({MIGRATION_LOCK})")
    connection.commit()
    try:
        context.configure(connection=connection, transaction_per_migration=True)
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()
    finally:
        connection.rollback()
        connection.exec_driver_sql(f"SELECT pg_advisory_unlock({MIGRATION_LOCK})")
        connection.commit()
connectable.dispose()
