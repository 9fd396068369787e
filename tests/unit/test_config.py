import os
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from stratacrawl.cold.db import conninfo, libpq_url, sqlalchemy_url, with_database
from stratacrawl.errors import ConfigError
from stratacrawl.redact import redact
from stratacrawl.settings import Settings
from stratacrawl.warm.client import _plain
from stratacrawl.warm.indices import IndexLayout, week_suffix

pytestmark = pytest.mark.unit


def test_settings_read_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRATACRAWL_REDIS_URL", "redis://r:1/2")
    monkeypatch.setenv("STRATACRAWL_ES_SHARDS", "3")
    monkeypatch.delenv("STRATACRAWL_DATABASE_URL", raising=False)   # the runner's own
    s = Settings()
    assert s.redis_url == "redis://r:1/2"
    assert s.es_shards == 3
    assert s.database_url is None


def test_settings_travel_to_a_child_process_and_back(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    """``to_env`` carries exactly what differs from the defaults, in the form ``Settings``
    reads: a child sizing its Bloom filter differently would read other bits."""
    for name in [k for k in os.environ if k.startswith("STRATACRAWL_")]:
        monkeypatch.delenv(name)
    s = Settings(bloom_capacity=123_456, redis_cluster=True, state_dir=tmp_path,
                 fetch_runs=3, es_refresh_interval="1s")
    env = s.to_env()
    assert env == {"STRATACRAWL_BLOOM_CAPACITY": "123456", "STRATACRAWL_REDIS_CLUSTER": "true",
                   "STRATACRAWL_STATE_DIR": str(tmp_path), "STRATACRAWL_FETCH_RUNS": "3",
                   "STRATACRAWL_ES_REFRESH_INTERVAL": "1s"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert Settings() == s


def test_a_misspelt_variable_or_key_is_an_error_naming_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRATACRAWL_BLOOM_CAPACTY", "5")
    with pytest.raises(ValueError, match=r"STRATACRAWL_BLOOM_CAPACTY is not a Stratacrawl "
                       r"setting \(did you mean STRATACRAWL_BLOOM_CAPACITY\?\)"):
        Settings()
    monkeypatch.delenv("STRATACRAWL_BLOOM_CAPACTY")
    with pytest.raises(ValueError, match="hot_windw"):
        Settings(hot_windw=5)   # type: ignore[call-arg]


def test_broken_setting_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRATACRAWL_ES_SHARDS", "many")
    with pytest.raises(ValueError, match="es_shards"):
        Settings()


def test_database_url_forms() -> None:
    assert sqlalchemy_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert sqlalchemy_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert conninfo("postgresql+psycopg://u@/db?host=/s") == {"user": "u", "dbname": "db",
                                                               "host": "/s"}
    assert libpq_url("postgresql+psycopg://u@/db?host=/s") == "user=u dbname=db host=/s"


def test_key_value_database_url_is_read_not_defaulted() -> None:
    """libpq's key=value form names the same database for psycopg and SQLAlchemy: it
    was once misread as a URI with no database, and Alembic migrated libpq's default."""
    kv = "host=127.0.0.1 port=1 user=u password=p dbname=x sslmode=disable"
    assert conninfo(kv) == {"host": "127.0.0.1", "port": "1", "user": "u", "password": "p",
                            "dbname": "x", "sslmode": "disable"}
    assert sqlalchemy_url(kv) == "postgresql+psycopg://u:p@127.0.0.1:1/x?sslmode=disable"
    assert conninfo(libpq_url(kv)) == conninfo(kv)
    assert conninfo(with_database(kv, "other"))["dbname"] == "other"
    # A unix-socket folder stays a libpq option in SQLAlchemy's URL.
    assert "host=%2Fs" in sqlalchemy_url("user=u dbname=db host=/s")


@pytest.mark.parametrize(("url", "problem"), [
    ("not a url", "neither a postgresql:// URI nor libpq key=value"),
    ("mysql://u@h/db", "scheme 'mysql'"),
    ("host=h port=1", "names no database"),
    ("postgresql://h", "names no database"),
    ("host=h dbname=x password='hunter2", "password=***"),
])
def test_bad_database_url_is_refused_naming_the_problem(url: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(problem)) as caught:
        libpq_url(url)
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://u:secret@h:5432/db", "postgresql://u:***@h:5432/db"),
    ("postgresql://h/db?user=u&password=secret&sslmode=require",
     "postgresql://h/db?user=u&password=***&sslmode=require"),
    ("host=h user=u password=secret dbname=x", "host=h user=u password=*** dbname=x"),
    ("host=h password='sec ret' dbname=x", "host=h password=*** dbname=x"),
    ("redis://:secret@h:6379/0", "redis://:***@h:6379/0"),
    ("redis://h:6379/0?password=secret", "redis://h:6379/0?password=***"),
    ("https://crawler:secret@es:9200", "https://crawler:***@es:9200"),
    ("https://es:9200/?api_key=secret", "https://es:9200/?api_key=***"),
    ("redis://h:6379/0", "redis://h:6379/0"),
])
def test_redact_hides_every_password_form(url: str, shown: str) -> None:
    assert redact(url) == shown


def test_compat_media_types_become_plain_json() -> None:
    headers = {"accept": "application/vnd.elasticsearch+json; compatible-with=9",
               "content-type": "application/vnd.elasticsearch+x-ndjson; compatible-with=8",
               "x-other": "kept"}
    out = _plain(headers)
    assert out == {"accept": "application/json", "content-type": "application/x-ndjson",
                   "x-other": "kept"}
    assert headers["accept"].startswith("application/vnd")  # the caller's dict is untouched


def test_weekly_index_names_use_iso_weeks() -> None:
    lay = IndexLayout(prefix="p_")
    # 2021-01-03 is in ISO week 53 of 2020.
    assert week_suffix(datetime(2021, 1, 3, tzinfo=UTC)) == "202053"
    assert lay.index("url_dedup", datetime(2026, 11, 30, tzinfo=UTC)) == "p_url_dedup-202649"
    window = lay.window("url_dedup", 7, now=datetime(2026, 11, 30, tzinfo=UTC))
    assert window == ["p_url_dedup-202649", "p_url_dedup-202648"]


def test_template_carries_layout_settings() -> None:
    t = IndexLayout(prefix="x_", shards=3, refresh_interval="5s", box_type="warm").template(
        "url_dedup")
    assert t["index_patterns"] == ["x_url_dedup-*"]
    settings = t["template"]["settings"]
    assert settings["number_of_shards"] == 3
    assert settings["index.routing.allocation.require.box_type"] == "warm"
    assert t["template"]["aliases"] == {"x_url_dedup": {}}
    props = t["template"]["mappings"]["properties"]
    assert props["url_hash"] == {"type": "keyword"} and props["http_status"]["type"] == "keyword"
