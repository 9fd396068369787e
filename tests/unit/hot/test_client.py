import pytest
import redis.asyncio as aioredis
from redis.exceptions import DataError

from stratacrawl.hot.client import connect

pytestmark = pytest.mark.unit

COMMANDS = [
    ("EVALSHA", "a" * 40, 2, "sc:u:{x}", "sc:u:{y}", 0, "1764650000.125", "lc\x1f1.5\x1fst\x1f200"),
    ("CONFIG GET", "maxmemory"),
    (b"SET", b"k", "é", 0.1, 1e20, -3, 2**40),
    ("ZADD", "q", 1764650000.123456, 17),
]


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6399/0", "unix:///tmp/none.sock?db=0"])
def test_a_single_node_client_packs_commands_as_redis_py_does(url: str) -> None:
    client = connect(url, cluster=False, max_connections=2, pool_wait_s=1,
                     connect_timeout_s=1)
    ours = client.connection_pool.connection_class()
    assert type(ours).__name__.startswith("Hiredis")
    theirs = aioredis.Connection()
    for command in COMMANDS:
        assert b"".join(ours.pack_command(*command)) == b"".join(theirs.pack_command(*command))
    with pytest.raises(DataError):   # redis-py's own error for what Redis cannot take
        ours.pack_command("SET", "k", None)
