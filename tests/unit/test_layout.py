"""The layout rules a newcomer relies on, enforced: every SQL statement lives in
``stratacrawl/cold/``, every Elasticsearch query in ``stratacrawl/warm/``, every Redis
command in ``stratacrawl/hot/`` and every Redis key is spelled in one module
(``hot/keys.py``) — a schema change is a change in one place, not a hunt —; and the import
contracts of ``pyproject.toml`` (layers, no cycles, no Prefect in the core) hold."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
PRODUCT = [ROOT / d for d in ("src", "flows", "blocks", "deployments", "bench")]
KEYS_MODULE = ROOT / "src" / "stratacrawl" / "hot" / "keys.py"


def _python_files() -> list[Path]:
    return sorted(p for d in PRODUCT for p in d.rglob("*.py") if "migrations" not in p.parts)


def _string_parts(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string constant, and the leading text of every f-string."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr) and node.values and isinstance(
                node.values[0], ast.Constant):
            out.append((node.lineno, str(node.values[0].value)))
    return out


def test_redis_keys_are_spelled_only_in_hot_keys() -> None:
    found = []
    for path in _python_files():
        if path == KEYS_MODULE:
            continue
        tree = ast.parse(path.read_text(), str(path))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef
                                    | ast.AsyncFunctionDef)
                      and n.body and isinstance(n.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if id(node) in docstrings:
                continue
            for line, text in _string_parts(node) if isinstance(
                    node, ast.Constant | ast.JoinedStr) else []:
                if text.startswith("sc:"):
                    found.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert found == [], "Redis key literals outside hot/keys.py:\n" + "\n".join(found)


SQL = re.compile(r"^\s*\(?\s*(SELECT|INSERT INTO|UPDATE \w+ (\w+ )?SET|DELETE FROM|"
                 r"WITH( RECURSIVE)? \w+ AS|CREATE (TEMP |UNIQUE )?(TABLE|INDEX|DATABASE)|"
                 r"ALTER TABLE|DROP (TABLE|INDEX|DATABASE)|TRUNCATE|COPY \w+)\b")


def test_sql_lives_only_in_cold() -> None:
    cold = ROOT / "src" / "stratacrawl" / "cold"
    found = []
    for path in _python_files():
        if cold in path.parents or path.parts[-2] == "bench" or ROOT / "bench" in path.parents:
            continue   # benchmarks set up their own scratch data
        tree = ast.parse(path.read_text(), str(path))
        found += [f"{path.relative_to(ROOT)}:{line}: {text[:60]!r}"
                  for line, text in _string_parts(tree) if SQL.search(text)]
    assert found == [], "SQL outside stratacrawl/cold/:\n" + "\n".join(found)


ES_CALL = re.compile(r"\b(es|\w+\.es)\.(search|mget|count|bulk|index|delete|indices|cat|update|"
                     r"get|scroll|open_point_in_time)\b|\basync_(bulk|scan)\(")


def test_elasticsearch_queries_live_only_in_warm() -> None:
    """Every call on the Elasticsearch client (queries, bulk writes, index admin) is in
    ``stratacrawl/warm/``; the rest of the core calls its functions."""
    warm = ROOT / "src" / "stratacrawl" / "warm"
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()[:70]}"
             for path in sorted((ROOT / "src" / "stratacrawl").rglob("*.py"))
             if warm not in path.parents
             for n, line in enumerate(path.read_text().splitlines(), 1) if ES_CALL.search(line)]
    assert found == [], "Elasticsearch calls outside stratacrawl/warm/:\n" + "\n".join(found)
    assert ES_CALL.search("resp = await self.es.mget(docs=docs)")
    assert ES_CALL.search("await async_bulk(es, actions)")
    assert not ES_CALL.search("r = await client.get(url)")


ES_IMPORT = re.compile(r"^\s*(from|import) elasticsearch\b", re.MULTILINE)


def test_only_the_warm_store_knows_the_elasticsearch_client() -> None:
    """The tiers, the frontier and the reports take a ``WarmStore`` (the composition root
    builds it): no module outside ``stratacrawl/warm/`` imports the client's package, so
    another warm backend is another store, not an edit of its callers."""
    warm = ROOT / "src" / "stratacrawl" / "warm"
    found = [str(path.relative_to(ROOT))
             for path in sorted((ROOT / "src" / "stratacrawl").rglob("*.py"))
             if warm not in path.parents and ES_IMPORT.search(path.read_text())]
    assert found == [], "the Elasticsearch client outside stratacrawl/warm/: " + ", ".join(found)
    assert ES_IMPORT.search("x = 1\n    from elasticsearch import AsyncElasticsearch\n")


REDIS_COMMANDS = (
    "bitfield|bitop|blpop|brpop|dbsize|decr|decrby|delete|eval|evalsha|execute_command|"
    "exists|expire|flushall|flushdb|get|getdel|hdel|hget|hgetall|hincrby|hincrbyfloat|hkeys|"
    "hlen|hmget|hset|hsetnx|incr|incrby|info|keys|llen|lpop|lpush|lrange|ltrim|mget|"
    "mget_nonatomic|pexpire|pipeline|publish|register_script|rpop|rpush|sadd|scan|scan_iter|"
    "scard|script_load|set|setrange|sismember|smembers|srem|strlen|ttl|unlink|xadd|zadd|"
    "zcard|zincrby|zpopmin|zrange|zrangebyscore|zrem|zremrangebyscore|zscore")
REDIS_CALL = re.compile(rf"\b(redis|\w+\.redis|pipe|r)\.({REDIS_COMMANDS})\(|"
                        r"\bredis\.(asyncio\.)?(Redis|RedisCluster)\b|"
                        r"stratacrawl\.hot\.scripts\b")


def test_redis_commands_live_only_in_hot() -> None:
    """Every command sent to Redis (and every Lua script call) is in ``stratacrawl/hot/``,
    behind a named operation; the rest of the core holds a client only to hand it to
    them. ``services/`` starts and joins the embedded servers and is left out."""
    core = ROOT / "src" / "stratacrawl"
    allowed = (core / "hot", core / "services")
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()[:70]}"
             for path in sorted(core.rglob("*.py"))
             if not any(a in path.parents for a in allowed)
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if REDIS_CALL.search(line)]
    assert found == [], "Redis commands outside stratacrawl/hot/:\n" + "\n".join(found)
    for line in ("await self.redis.hset(WORKERS_KEY, w, hb)", "async with redis.pipeline(",
                 "info = await r.info('server')", "redis.Redis.from_url(url).flushdb()",
                 "from stratacrawl.hot.scripts import script", "await c.redis.zcard(k)"):
        assert REDIS_CALL.search(line), line
    for line in ("r = await client.get(url)", "self._cursor.get(source_id)",
                 "m.hot_backlog = await ready_count(redis, sid)"):
        assert not REDIS_CALL.search(line), line


def test_the_cold_tier_has_one_calling_style() -> None:
    """Every async function of ``stratacrawl/cold/`` that talks to PostgreSQL takes ``db``
    first (the pool, or a connection the caller holds); one that only makes sense inside
    the caller's transaction takes ``conn`` and says so in its docstring."""
    found = []
    for path in sorted((ROOT / "src" / "stratacrawl" / "cold").glob("*.py")):
        for fn in ast.parse(path.read_text()).body:
            if not isinstance(fn, ast.AsyncFunctionDef) or not fn.args.args:
                continue
            first = fn.args.args[0]
            ann = ast.unparse(first.annotation) if first.annotation else ""
            doc = ast.get_docstring(fn) or ""
            if first.arg == "db" and ann == "Db":
                continue
            if first.arg == "conn" and "transaction" in doc:
                continue
            if "Pool" in ann or "Connection" in ann:
                found.append(f"{path.name}: {fn.name}({first.arg}: {ann})")
    # ping waits for the pool itself to lend a connection: a question to the pool
    assert found == ["pool.py: ping(pool: AsyncConnectionPool)"], "\n".join(found)


def test_the_sql_pattern_sees_what_the_code_base_writes() -> None:
    for text in ("SELECT 1", "INSERT INTO tasks (a) VALUES (1)", "UPDATE tasks t SET x = 1",
                 "WITH RECURSIVE s AS (", "DELETE FROM records", "CREATE TEMP TABLE x (",
                 "COPY staging FROM STDIN", "DROP TABLE x", "  SELECT d, sum(created)"):
        assert SQL.search(text), text
    for text in ("select a colour", "Updated 3 rows", "WITH the cadence", "Select a source"):
        assert not SQL.search(text), text


# .ci/run runs both tools as steps of their own before the suite and says so here.
STATIC_CHECKED_BY_CI = pytest.mark.skipif(
    os.environ.get("STRATACRAWL_TEST_STATIC_CHECKS") == "passed",
    reason="run by .ci/run as a step of its own before the suite")


@STATIC_CHECKED_BY_CI
@pytest.mark.slow   # (a whole-tree tool run: the full suite, not the fast loop)
def test_the_import_contracts_hold() -> None:
    """The layers, the absence of cycles and the Prefect-free core, as written in
    ``pyproject.toml``'s ``[tool.importlinter]`` contracts: a lower layer never imports a
    higher one (a store never reaches for the crawl loop, the core never for a flow), so
    each piece can be understood, tested and replaced from below."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    run = subprocess.run([str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert re.search(r"Contracts: [1-9]\d* kept, 0 broken", run.stdout), run.stdout[-2000:]


@STATIC_CHECKED_BY_CI
@pytest.mark.slow   # (a whole-tree tool run: the full suite, not the fast loop)
def test_the_code_type_checks() -> None:
    """mypy, strict, over the package, the flows, the blocks and the deployments: a flow
    calling a store with a signature it no longer has fails here, not in a scheduled run."""
    run = subprocess.run([str(Path(sys.executable).with_name("mypy")),
                          "src", "flows", "blocks", "deployments"],
                         cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
