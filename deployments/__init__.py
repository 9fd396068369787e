"""Bootstrap of a Prefect workspace for Stratacrawl: work pool, blocks; and a local serve entry."""
