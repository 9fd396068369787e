"""One TLS context per process: a source client must not load the CA bundle again."""

import pytest

from stratacrawl.fetch.fetcher import SourceClient
from stratacrawl.fetch.tls import ssl_context
from stratacrawl.sources import Source

pytestmark = pytest.mark.unit


async def test_source_clients_share_the_process_tls_context() -> None:
    a = SourceClient(Source(id="a", seeds=["https://a.example/"]))
    b = SourceClient(Source(id="b", seeds=["https://b.example/"]))
    try:
        assert a.transport.ssl_context is ssl_context()
        assert b.transport.ssl_context is ssl_context()
    finally:
        await a.aclose()
        await b.aclose()
