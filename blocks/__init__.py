"""Prefect Blocks: shared connection settings and secrets for the three tiers and the sources file."""

from blocks.connections import (
    BLOCK_NAMES,
    ElasticsearchConnection,
    PostgresConnection,
    RedisConnection,
    SourcesFileBlock,
)

__all__ = ["BLOCK_NAMES", "ElasticsearchConnection", "PostgresConnection", "RedisConnection",
           "SourcesFileBlock"]
