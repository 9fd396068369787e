"""Alembic environment: the URL comes from the caller (``stratacrawl.cold.db.migrate``)."""

from alembic import context
from sqlalchemy import create_engine, pool

url = str(context.config.attributes.get("url") or context.config.get_main_option("sqlalchemy.url"))
connectable = create_engine(url, poolclass=pool.NullPool)
with connectable.connect() as connection:
    # Serialize concurrent migrators (several workers starting at once).
    connection.exec_driver_sql("SELECT pg_advisory_lock(734201)")
    context.configure(connection=connection, transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()
    connection.exec_driver_sql("SELECT pg_advisory_unlock(734201)")
    connection.commit()
connectable.dispose()
