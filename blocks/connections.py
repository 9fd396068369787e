"""Connection blocks. Each holds configuration only and turns it into core settings
(``settings_overrides``); the core's wiring builds the clients from those settings."""

from __future__ import annotations

from typing import Any

from prefect.blocks.core import Block
from pydantic import Field, SecretStr

_DOCS = "https://github.com/stratacrawl/stratacrawl#configuration"
# No logo: an address that does not answer showed as a broken image on every block in
# the UI; without one the UI draws its own block icon.
_LOGO = None


class RedisConnection(Block):
    """Where the hot tier (Redis) lives.

    Example:
        ```python
        from blocks.connections import RedisConnection
        block = RedisConnection.load("BLOCK_NAME")
        ```
    """

    _block_type_name = "Stratacrawl Redis"
    _block_type_slug = "stratacrawl-redis"
    _logo_url = _LOGO
    _documentation_url = _DOCS  # type: ignore[assignment]

    url: SecretStr = Field(description="Redis URL, e.g. redis://host:6379/0 (may hold a password).")
    cluster: bool = Field(default=False,
                          description="The URL is a node of a Redis Cluster (keys spread "
                                      "over its slots).")

    def settings_overrides(self) -> dict[str, Any]:
        return {"redis_url": self.url.get_secret_value(), "redis_cluster": self.cluster}


class ElasticsearchConnection(Block):
    """Where the warm tier (Elasticsearch 8.x/9.x, or the embedded API server) lives.

    Example:
        ```python
        from blocks.connections import ElasticsearchConnection
        block = ElasticsearchConnection.load("BLOCK_NAME")
        ```
    """

    _block_type_name = "Stratacrawl Elasticsearch"
    _block_type_slug = "stratacrawl-elasticsearch"
    _logo_url = _LOGO
    _documentation_url = _DOCS  # type: ignore[assignment]

    url: SecretStr = Field(description="Elasticsearch URL, e.g. https://user:pass@es:9200.")
    plain_json: bool = Field(
        default=False,
        description="Send plain application/json (needed by the embedded API server only).")
    index_prefix: str = Field(default="", description="Prefix of every warm index name.")
    box_type: str | None = Field(default=None,
                                 description="Node attribute box_type the indices must be on.")

    def settings_overrides(self) -> dict[str, Any]:
        return {"elasticsearch_url": self.url.get_secret_value(), "es_plain_json": self.plain_json,
                "es_index_prefix": self.index_prefix, "es_box_type": self.box_type}


class PostgresConnection(Block):
    """Where the cold tier (PostgreSQL 14+) lives.

    Example:
        ```python
        from blocks.connections import PostgresConnection
        block = PostgresConnection.load("BLOCK_NAME")
        ```
    """

    _block_type_name = "Stratacrawl PostgreSQL"
    _block_type_slug = "stratacrawl-postgres"
    _logo_url = _LOGO
    _documentation_url = _DOCS  # type: ignore[assignment]

    url: SecretStr = Field(description="PostgreSQL URL, e.g. postgresql://user:pass@db/crawl.")

    def settings_overrides(self) -> dict[str, Any]:
        return {"database_url": self.url.get_secret_value()}


class SourcesFileBlock(Block):
    """The sources file every flow reads (a path on the worker's host).

    Example:
        ```python
        from blocks.connections import SourcesFileBlock
        block = SourcesFileBlock.load("BLOCK_NAME")
        ```
    """

    _block_type_name = "Stratacrawl Sources File"
    _block_type_slug = "stratacrawl-sources-file"
    _logo_url = _LOGO
    _documentation_url = _DOCS  # type: ignore[assignment]

    path: str = Field(description="Path of sources.yaml on the worker host.")

    def settings_overrides(self) -> dict[str, Any]:
        return {"sources": self.path}


# The document names `deployments/bootstrap.py` saves and flows load.
BLOCK_NAMES: dict[str, type[Block]] = {
    "stratacrawl-redis": RedisConnection,
    "stratacrawl-elasticsearch": ElasticsearchConnection,
    "stratacrawl-postgres": PostgresConnection,
    "stratacrawl-sources": SourcesFileBlock,
}
