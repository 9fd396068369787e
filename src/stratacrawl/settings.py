"""Process settings from the environment (``STRATACRAWL_*``).

Connection URLs left unset mean "use the embedded server for that tier"; see
:mod:`stratacrawl.services`.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PREFIX = "STRATACRAWL_"
# STRATACRAWL_* variables read elsewhere than here (and the test suite's own).
OTHER_VARIABLES = frozenset({"ALERT_WEBHOOK_URL", "LOG_LEVEL", "PROJECT_DIR", "LOADTEST_VIA",
                             "GX_DATABASE_URL"})


class Settings(BaseSettings):
    """Knobs of one Stratacrawl process."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, extra="forbid")

    redis_url: str | None = None
    # A Redis Cluster at ``redis_url`` (any of its nodes): keys spread over its slots.
    redis_cluster: bool = False
    elasticsearch_url: str | None = None
    database_url: str | None = None
    state_dir: Path = Field(default=Path(".stratacrawl"))
    sources: Path = Field(default=Path("sources.yaml"))
    # Elasticsearch index layout (warm tier).
    es_index_prefix: str = ""
    es_shards: int = 1
    es_replicas: int = 0
    es_refresh_interval: str = "30s"
    es_box_type: str | None = None
    # The embedded API server rejects the 8.x/9.x compatibility media type; real
    # clusters keep the default. ``None`` = decide from whether the URL is embedded.
    es_plain_json: bool | None = None
    connect_timeout_s: float = 5.0
    # Frontier.
    bloom_capacity: int = Field(default=10_000_000, gt=0)
    bloom_fp_rate: float = Field(default=0.001, gt=0, lt=1)
    bloom_shards: int = Field(default=1, ge=1)
    dedup_window_days: int = Field(default=7, ge=1)
    hot_window: int = Field(default=2000, ge=10)
    # Ready-window entries of all sources together (~100 B each in Redis): with many
    # sources each window shrinks (to no less than 64) so Redis stays bounded.
    hot_queue_budget: int = Field(default=1_000_000, ge=1000)
    lease_s: float = Field(default=300.0, gt=0)
    pg_pool_size: int = Field(default=8, ge=1)
    redis_max_connections: int = Field(default=64, ge=1)
    # Per cluster node: redis-py's cluster client fails at the cap instead of waiting.
    redis_cluster_max_connections: int = Field(default=1024, ge=1)
    # Batches one fetch worker runs at once (each serial, one request in flight): raise it
    # for slow sources, where throughput = in-flight requests / latency.
    fetch_max_batches: int = Field(default=64, ge=1)
    # Fetch runs at once on a Prefect server `stratacrawl up` starts (its fetch deployment's
    # concurrency limit); None: one per core of that host.
    fetch_runs: int | None = Field(default=None, ge=1)
    # Staging flushes a worker runs at once, each on its own connection and transaction.
    staging_flushes: int = Field(default=2, ge=1)
    # Tiers: the hot budget that triggers eviction, warm retention before sinking to cold,
    # staging retention, and when compensation re-schedules unfinished tasks.
    hot_budget_mb: float = Field(default=512.0, gt=0)
    # How often a crawl demotes committed fetches to warm while it runs; 0 (the default):
    # only once at its end, and the `demotion` deployment keeps warm current. Demoting in
    # the fetch loop cost a third of a worker's pages on 2 cores (bench fetch; see
    # docs/operations.md, "Several hosts").
    demote_every_s: float = Field(default=0.0, ge=0)
    # How long a crawl demotes at its end, after its last page landed: bounded, so a crawl
    # ends within seconds of its work; what is left waits for the `demotion` deployment
    # (or the next crawl) in cold's watermark, and dedup answers from cold meanwhile.
    end_demotion_s: float = Field(default=1.0, ge=0)
    warm_retention_days: int = Field(default=30, ge=1)
    staging_retention_days: int = Field(default=7, ge=1)
    compensate_after_h: float = Field(default=6.0, gt=0)
    # Transitions. A crawl whose own tier (Redis, PostgreSQL) stops answering pauses its
    # claims and waits this long for it before it stops (exit 3); a stopping process
    # (SIGTERM, SIGINT, a Prefect cancellation, ``--seconds``) lets its in-flight requests
    # finish for at most ``drain_s``, then gives the rest back to the queue and lands what
    # it fetched. ``fetch_deadline_s``: a request's whole time, retries included (a source's
    # ``deadline_s`` overrides it); past it the fetch ends as ``timeout-total``.
    tier_outage_s: float = Field(default=300.0, gt=0)
    drain_s: float = Field(default=10.0, ge=0)
    fetch_deadline_s: float = Field(default=60.0, gt=0)
    # Monitoring: live counters and traces of every request (off only to measure its cost).
    monitoring: bool = True
    alert_hold_s: float = Field(default=180.0, ge=0)
    metrics_port: int = Field(default=9464, ge=0, le=65535)       # `metrics serve`
    worker_metrics_port: int = Field(default=0, ge=0, le=65535)   # a crawl's own /metrics
    # Validation: the committed Great Expectations project (``<expectations_dir>/gx``), where
    # its results store keeps validation results and where Data Docs are written (``None`` =
    # under the state folder). The project's ``great_expectations.yml`` reads the last two as
    # ``${STRATACRAWL_GX_RESULTS_DIR}`` and ``${STRATACRAWL_DATA_DOCS_DIR}``.
    expectations_dir: Path = Field(default=Path("expectations"))
    gx_results_dir: Path | None = None
    data_docs_dir: Path | None = None
    # Where the Data Docs folder is served over HTTP (e.g. ``http://127.0.0.1:8090/docs/``,
    # the ops server; ``stratacrawl up`` sets it): links to Data Docs pages (Prefect link
    # artifacts, alerts, stored results) use it instead of ``file://`` paths.
    data_docs_url: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_unknown_variables(cls, data: Any) -> Any:
        """A misspelt STRATACRAWL_* variable is an error naming it (and the setting it
        probably meant), not a setting silently left at its default."""
        known = {name.upper() for name in cls.model_fields} | OTHER_VARIABLES
        for variable in os.environ:
            name = variable[len(PREFIX):]
            if variable.startswith(PREFIX) and name not in known and not name.startswith(
                    "TEST_"):
                close = difflib.get_close_matches(name, known, n=1)
                hint = f" (did you mean {PREFIX}{close[0]}?)" if close else ""
                raise ValueError(f"{variable} is not a Stratacrawl setting{hint}")
        return data

    def to_env(self) -> dict[str, str]:
        """The settings that differ from their defaults as ``STRATACRAWL_*`` variables:
        what a child process needs to run with these very settings (its ``Settings()``
        reads them back)."""
        out: dict[str, str] = {}
        for name, value in self.model_dump(exclude_defaults=True).items():
            if value is None:
                continue
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
            out[f"{PREFIX}{name.upper()}"] = text
        return out

    @property
    def gx_results_path(self) -> Path:
        return (self.gx_results_dir or self.state_path / "validation").expanduser().resolve()

    @property
    def data_docs_path(self) -> Path:
        return (self.data_docs_dir or self.state_path / "data_docs").expanduser().resolve()

    @property
    def state_path(self) -> Path:
        return self.state_dir.expanduser().resolve()
