"""Fixtures: real tiers for every test, isolated per test.

Where each tier comes from, in order: ``STRATACRAWL_*_URL`` variables; this
machine's PostgreSQL on 127.0.0.1:5432 and Redis on 127.0.0.1:6379 when they
answer; otherwise the embedded servers (started once per session, stopped after).
Elasticsearch is the embedded API server unless ``STRATACRAWL_ELASTICSEARCH_URL``
is set. Isolation: a fresh PostgreSQL database per test (cloned from a migrated
template), a Redis DB number per xdist worker flushed around each test, and a
unique index prefix per test on the Elasticsearch API. Two test sessions can share one
PostgreSQL and one Redis (a run on a machine whose CI is testing too): the templates are
named per session and dropped at its end, and each worker leases its Redis DB number
in DB 0, so no two sessions flush each other's data.
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from stratacrawl.cold import db
from stratacrawl.services import Endpoints, Services
from stratacrawl.settings import Settings
from stratacrawl.wiring import Runtime

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

TEMPLATE_DB = "stratacrawl_test_template"
REDIS_DBS = range(1, 16)             # DB 0 holds the leases
REDIS_LEASE_S = 3600                 # renewed by every test; a killed session's lapses
ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    """The fast loop (``-m "not slow"``) draws fewer property examples (see
    ``tests/support/examples.py``); test modules are imported after this. Every process
    the run starts ends with it, however it ends (``tests/support/reaper.py``)."""
    from tests.support import examples, reaper
    examples.FAST = "not slow" in (config.option.markexpr or "")
    reaper.watch_this_run()


@pytest.fixture(scope="session", autouse=True)
def gx_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A copy of the committed GX project for the whole session (the CLI and flow runs the
    tests start inherit it): a validation of a source the project does not know writes its
    objects there, never into the checkout."""
    import shutil

    copy = tmp_path_factory.mktemp("gx") / "expectations"
    shutil.copytree(ROOT / "expectations", copy, ignore=shutil.ignore_patterns("uncommitted"))
    before = os.environ.get("STRATACRAWL_EXPECTATIONS_DIR")
    os.environ["STRATACRAWL_EXPECTATIONS_DIR"] = str(copy)
    yield copy
    if before is None:
        os.environ.pop("STRATACRAWL_EXPECTATIONS_DIR", None)
    else:
        os.environ["STRATACRAWL_EXPECTATIONS_DIR"] = before


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _local_postgres() -> str | None:
    if not _answers("127.0.0.1", 5432):
        return None
    url = "postgresql://postgres@127.0.0.1:5432/postgres"
    try:
        with psycopg.connect(url, connect_timeout=2):
            return url
    except psycopg.Error:
        return None


@pytest.fixture(scope="session")
def tier_endpoints(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoints]:
    """One URL per tier for the whole session (admin database URL for PostgreSQL)."""
    env = Settings()
    redis_url = env.redis_url or (
        "redis://127.0.0.1:6379/0" if _answers("127.0.0.1", 6379) else None)
    pg_url = env.database_url or _local_postgres()
    state = tmp_path_factory.mktemp("tiers")
    settings = Settings(redis_url=redis_url, database_url=pg_url,
                        elasticsearch_url=env.elasticsearch_url, state_dir=state)
    with Services(settings) as endpoints:
        yield endpoints


def _worker_index() -> int:
    wid = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(wid.removeprefix("gw") or 0)


# This session's name: xdist gives all workers of one run the same id; a run without
# xdist makes its own.
_SESSION = (os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex)[:8]


def _session_name(kind: str) -> str:
    """A database name of this session and worker."""
    return f"{TEMPLATE_DB}_{_SESSION}_{_worker_index()}{kind}"


def _drop_database(admin: str, name: str) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def template_db(tier_endpoints: Endpoints) -> Iterator[str]:
    """A database migrated to head, cloned for each test (CREATE DATABASE … TEMPLATE);
    this session's own, dropped at its end."""
    admin = db.libpq_url(tier_endpoints.database_url)
    name = _session_name("")
    db.migrate(db.recreate_database(admin, name))
    yield name
    _drop_database(admin, name)


def _cloned_database(admin_url: str, template: str) -> Iterator[str]:
    """A database cloned from ``template`` on the server of ``admin_url``; dropped after."""
    admin = db.libpq_url(admin_url)
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    yield db.with_database(admin, name)
    _drop_database(admin, name)


@pytest.fixture
def database_url(tier_endpoints: Endpoints, template_db: str) -> Iterator[str]:
    """A fresh, migrated database for this test; dropped afterwards."""
    yield from _cloned_database(tier_endpoints.database_url, template_db)


def _lease_key(n: int) -> str:
    return f"stratacrawl-tests:db:{n}"


@pytest.fixture(scope="session")
def redis_db(tier_endpoints: Endpoints) -> Iterator[tuple[redis.Redis, int]]:
    """The Redis DB number this worker of this session holds (a lease in DB 0, taken by
    ``SET NX``): another session on the same Redis takes another number."""
    base = tier_endpoints.redis_url.rsplit("/", 1)[0]
    leases = redis.Redis.from_url(f"{base}/0")
    holder = f"{_SESSION}:{_worker_index()}"
    held = next((n for n in REDIS_DBS
                 if leases.set(_lease_key(n), holder, nx=True, ex=REDIS_LEASE_S)), None)
    if held is None:
        pytest.fail(f"every Redis DB {REDIS_DBS.start}-{REDIS_DBS.stop - 1} on "
                    f"{base} is leased by another test session (keys {_lease_key(0)[:-1]}*)")
    yield leases, held
    if leases.get(_lease_key(held)) == holder.encode():
        leases.delete(_lease_key(held))
    leases.close()


@pytest.fixture
def redis_url(tier_endpoints: Endpoints, redis_db: tuple[redis.Redis, int]) -> Iterator[str]:
    """This worker's Redis DB (its lease renewed), flushed before and after the test."""
    leases, n = redis_db
    leases.expire(_lease_key(n), REDIS_LEASE_S)
    url = f"{tier_endpoints.redis_url.rsplit('/', 1)[0]}/{n}"
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()
    client.close()


@pytest.fixture
def es_prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}_"


@pytest.fixture
def settings(tmp_path: Path, es_prefix: str, tier_endpoints: Endpoints,
             database_url: str, redis_url: str) -> Settings:
    return Settings(redis_url=redis_url, database_url=database_url,
                    elasticsearch_url=tier_endpoints.elasticsearch_url,
                    es_plain_json="elasticsearch" in tier_endpoints.embedded,
                    es_index_prefix=es_prefix, state_dir=tmp_path / "state")


@contextlib.asynccontextmanager
async def prepared_runtime(settings: Settings, embedded: tuple[str, ...] | list[str]
                           ) -> AsyncIterator[Runtime]:
    """A prepared Runtime on ``settings``' tiers; its indices deleted afterwards."""
    endpoints = Endpoints(settings.redis_url or "", settings.elasticsearch_url or "",
                          settings.database_url or "", embedded)
    runtime = Runtime(settings, endpoints)
    await runtime.prepare()
    yield runtime
    async with runtime.warm_store() as warm:
        await warm.es.indices.delete(index=f"{settings.es_index_prefix}*",
                                     ignore_unavailable=True)


@pytest.fixture
async def rt(settings: Settings, tier_endpoints: Endpoints) -> AsyncIterator[Runtime]:
    """A prepared Runtime on this test's database, Redis DB and index prefix."""
    async with prepared_runtime(settings, tier_endpoints.embedded) as runtime:
        yield runtime


@contextlib.asynccontextmanager
async def small_components(rt: Runtime) -> AsyncIterator[object]:
    from stratacrawl.wiring import open_components

    rt.settings.bloom_capacity = 100_000
    async with open_components(rt) as c:
        yield c


@pytest.fixture
async def comps(rt: Runtime) -> AsyncIterator[object]:
    """Open frontier components on this test's tiers (small Bloom filter)."""
    async with small_components(rt) as c:
        yield c


# -- the cold tier's contract: the system PostgreSQL and the embedded one ----------------

COLD_TIERS = ("system-postgres", "embedded-postgres")


@pytest.fixture(scope="session")
def embedded_postgres(tier_endpoints: Endpoints,
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The embedded PostgreSQL's admin URL: the session's own when it is the embedded one,
    else one started for this session (per xdist worker)."""
    if "postgres" in tier_endpoints.embedded:
        yield tier_endpoints.database_url
        return
    state = tmp_path_factory.mktemp("embedded-postgres")
    with Services(Settings(state_dir=state), tiers=("postgres",)) as endpoints:
        yield endpoints.database_url


_cold_templates: dict[str, str] = {}


@pytest.fixture(scope="session", autouse=True)
def _drop_cold_templates() -> Iterator[None]:
    """The cold contract's templates of this session go at its end."""
    yield
    for admin, name in _cold_templates.items():
        with contextlib.suppress(psycopg.Error):   # an embedded server may be gone already
            _drop_database(admin, name)


def _fresh_database(admin_url: str) -> Iterator[str]:
    """A database migrated to head on the server of ``admin_url`` (cloned from a template
    this session migrated once there), dropped afterwards."""
    admin = db.libpq_url(admin_url)
    if admin not in _cold_templates:
        name = _session_name(f"_cold{len(_cold_templates)}")
        db.migrate(db.recreate_database(admin, name))
        _cold_templates[admin] = name
    yield from _cloned_database(admin, _cold_templates[admin])


@pytest.fixture(params=COLD_TIERS)
def cold_settings(request: pytest.FixtureRequest, settings: Settings,
                  tier_endpoints: Endpoints) -> Iterator[Settings]:
    """This test's settings on the system PostgreSQL (15 on this machine kind), then on
    the embedded PostgreSQL (16, pgserver): a test over ``cold_comps`` is a contract both
    keep. Without a system PostgreSQL (a fresh machine) only the embedded one runs."""
    if request.param == "system-postgres":
        if "postgres" in tier_endpoints.embedded:
            pytest.skip("no system PostgreSQL here: the session runs on the embedded one")
        yield settings
        return
    admin = request.getfixturevalue("embedded_postgres")
    for url in _fresh_database(admin):
        yield settings.model_copy(update={"database_url": url})


@pytest.fixture
async def cold_comps(cold_settings: Settings,
                     tier_endpoints: Endpoints) -> AsyncIterator[object]:
    """Open components (small Bloom filter) on ``cold_settings``' PostgreSQL."""
    async with prepared_runtime(cold_settings, tier_endpoints.embedded) as runtime, \
            small_components(runtime) as c:
        yield c


# -- Redis Cluster: the hot tier's cluster path ------------------------------------------

@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Redis Cluster's URL: ``STRATACRAWL_TEST_REDIS_CLUSTER_URL``, or three embedded
    nodes started for this session (per xdist worker)."""
    url = os.environ.get("STRATACRAWL_TEST_REDIS_CLUSTER_URL")
    if url:
        yield url
        return
    from stratacrawl.services.cluster import EmbeddedRedisCluster

    with EmbeddedRedisCluster(tmp_path_factory.mktemp("redis-cluster"), nodes=3) as cluster:
        yield cluster.url


@pytest.fixture
def cluster_url(redis_cluster: str) -> Iterator[str]:
    """The cluster, flushed on every primary before and after the test."""
    client = redis.RedisCluster.from_url(redis_cluster)
    client.flushall(target_nodes=redis.RedisCluster.PRIMARIES)
    yield redis_cluster
    client.flushall(target_nodes=redis.RedisCluster.PRIMARIES)
    client.close()


@pytest.fixture
def cluster_settings(settings: Settings, cluster_url: str) -> Settings:
    return settings.model_copy(update={"redis_url": cluster_url, "redis_cluster": True})


@pytest.fixture
async def cluster_rt(cluster_settings: Settings,
                     tier_endpoints: Endpoints) -> AsyncIterator[Runtime]:
    async with prepared_runtime(cluster_settings, tier_endpoints.embedded) as runtime:
        yield runtime


@pytest.fixture
async def cluster_comps(cluster_rt: Runtime) -> AsyncIterator[object]:
    """Open frontier components whose hot tier is the Redis Cluster."""
    async with small_components(cluster_rt) as c:
        yield c


# -- the hot tier's contract: one test, both deployments --------------------------------

HOT_TIERS = ("redis", "redis-cluster")


@pytest.fixture(params=HOT_TIERS)
def hot_settings(request: pytest.FixtureRequest, settings: Settings) -> Settings:
    """This test's settings on a single Redis, then on the three-node Redis Cluster: a
    test over ``hot_comps`` is a contract every hot deployment keeps."""
    if request.param == "redis":
        return settings
    cluster = request.getfixturevalue("cluster_url")
    return settings.model_copy(update={"redis_url": cluster, "redis_cluster": True})


@pytest.fixture
async def hot_comps(hot_settings: Settings,
                    tier_endpoints: Endpoints) -> AsyncIterator[object]:
    """Open components (small Bloom filter) on ``hot_settings``' hot tier."""
    async with prepared_runtime(hot_settings, tier_endpoints.embedded) as runtime, \
            small_components(runtime) as c:
        yield c

