"""Prefect's block standard test suite, for every block."""

import pytest
from prefect.blocks.core import Block
from prefect.testing.standard_test_suites import BlockStandardTestSuite

from blocks.connections import BLOCK_NAMES

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("block", list(BLOCK_NAMES.values()), ids=lambda b: b.__name__)
class TestAllBlocks(BlockStandardTestSuite):
    @pytest.fixture
    def block(self, block: type[Block]) -> type[Block]:
        return block

    def test_has_a_valid_image(self, block: type[Block]) -> None:
        # No logo rather than a broken one: the address it had does not answer, and the
        # UI showed a broken image on every block. Without one the UI draws its own icon.
        assert block._logo_url is None


def test_blocks_map_to_settings() -> None:
    from blocks.connections import ElasticsearchConnection, PostgresConnection, RedisConnection
    from stratacrawl.settings import Settings

    pg = PostgresConnection(url="postgresql://u:pw@h/db")
    es = ElasticsearchConnection(url="http://es:9200", plain_json=True, index_prefix="p_")
    redis = RedisConnection(url="redis://node-1:7000", cluster=True)
    s = Settings(**pg.settings_overrides(), **es.settings_overrides(),
                 **redis.settings_overrides())
    assert s.redis_url == "redis://node-1:7000" and s.redis_cluster is True
    assert Settings(**RedisConnection(url="redis://r:6379/0").settings_overrides()
                    ).redis_cluster is False
    assert s.database_url == "postgresql://u:pw@h/db"
    assert s.es_plain_json is True and s.es_index_prefix == "p_"
    assert "pw" not in repr(pg)  # secrets stay secret
