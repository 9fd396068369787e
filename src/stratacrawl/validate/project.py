"""The Great Expectations project: a File Data Context committed in ``expectations/gx``.

Per source it holds what GX itself reads and writes: a query asset of the source's records
with a batch definition ``day`` (partitioned on the ``day`` column), the suite
``records.<source>``, a validation definition and a checkpoint of the same name whose action
updates the ``stratacrawl`` Data Docs site. Nothing in it is machine-specific: the database
URL, the results folder and the Data Docs folder are GX config variables
(``${STRATACRAWL_GX_DATABASE_URL}``, ``${STRATACRAWL_GX_RESULTS_DIR}``,
``${STRATACRAWL_DATA_DOCS_DIR}``), which Stratacrawl passes as runtime values (so neither the
environment of the process nor a file holds the URL) and a data engineer sets in the
environment or in ``gx/uncommitted/config_variables.yml``. Any store backend GX supports
can replace the two folders by editing ``great_expectations.yml``.

A run only reads the project; ``write_source`` (``stratacrawl expectations init``, and a
validation of a source the project does not know yet) writes a source's objects, and
rewrites the asset when the source's fields changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stratacrawl.cold.db import sqlalchemy_url
from stratacrawl.cold.records import asset_query
from stratacrawl.settings import Settings
from stratacrawl.sources import Source
from stratacrawl.validate.suites import default_expectations, suite_name

SITE = "stratacrawl"
DATASOURCE = "stratacrawl"
BATCH = "day"
DATABASE_VAR = "STRATACRAWL_GX_DATABASE_URL"
RESULTS_VAR = "STRATACRAWL_GX_RESULTS_DIR"
DOCS_VAR = "STRATACRAWL_DATA_DOCS_DIR"


def project_dir(settings: Settings) -> Path:
    """The folder GX calls the project root (the context itself is its ``gx/``)."""
    return settings.expectations_dir.expanduser().resolve()


def config_path(settings: Settings) -> Path:
    return project_dir(settings) / "gx" / "great_expectations.yml"


def folders(settings: Settings) -> dict[str, str]:
    """The config variables that name this host's folders (no secrets)."""
    return {RESULTS_VAR: str(settings.gx_results_path), DOCS_VAR: str(settings.data_docs_path)}


def open_project(settings: Settings, database_url: str | None = None) -> Any:
    """The project's data context; a new project is created (and configured) first."""
    import great_expectations as gx

    env = folders(settings)
    if database_url:
        env[DATABASE_VAR] = sqlalchemy_url(database_url)
    root = project_dir(settings)
    if not config_path(settings).exists():
        root.mkdir(parents=True, exist_ok=True)
        gx.get_context(mode="file", project_root_dir=str(root), runtime_environment=env)
        _configure(config_path(settings))
    return gx.get_context(mode="file", project_root_dir=str(root), runtime_environment=env)


def _configure(path: Path) -> None:
    """A new project's ``great_expectations.yml``, as GX scaffolded it, with results and Data
    Docs in the configured folders, the offline site builder, and no telemetry or progress
    bars."""
    from ruamel.yaml import YAML

    yaml = YAML()
    doc = yaml.load(path.read_text(encoding="utf-8"))
    doc["stores"]["validation_results_store"]["store_backend"] = {
        "class_name": "TupleFilesystemStoreBackend", "base_directory": "${" + RESULTS_VAR + "}"}
    doc["data_docs_sites"] = {SITE: {
        "module_name": "stratacrawl.validate.datadocs", "class_name": "OfflineSiteBuilder",
        "show_how_to_buttons": False,
        "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                          "base_directory": "${" + DOCS_VAR + "}"},
        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"}}}
    doc["analytics_enabled"] = False
    doc["progress_bars"] = {"globally": False, "metric_calculations": False}
    with path.open("w", encoding="utf-8") as fh:
        yaml.dump(doc, fh)


def write_config_variables(context: Any, settings: Settings) -> Path:
    """Write this host's folders into ``gx/uncommitted/config_variables.yml`` (GX reads it
    when the environment does not name them), so GX's own API finds them too."""
    for name, value in folders(settings).items():
        context.save_config_variable(name, value)
    return Path(context.root_directory) / "uncommitted" / "config_variables.yml"


def _datasource(context: Any) -> Any:
    try:
        return context.data_sources.get(DATASOURCE)
    except (KeyError, ValueError, LookupError):
        # A temporary table per batch: the records' JSON is parsed once, not once a metric.
        return context.data_sources.add_postgres(name=DATASOURCE,
                                                 connection_string="${" + DATABASE_VAR + "}",
                                                 create_temp_table=True)


def _get(store: Any, name: str) -> Any | None:
    try:
        return store.get(name)
    except Exception:  # GX raises a different not-found error per store
        return None


def write_source(context: Any, source: Source, *, overwrite: bool = False) -> list[str]:
    """Write what the project lacks for ``source`` (everything with ``overwrite``; the asset
    again when the source's fields changed); returns what was written."""
    import great_expectations as gx
    from great_expectations.checkpoint import UpdateDataDocsAction
    from great_expectations.core.partitioners import PartitionerColumnValue
    from great_expectations.expectations.expectation_configuration import (
        ExpectationConfiguration,
    )

    name, written = suite_name(source.id), []
    datasource = _datasource(context)
    query = asset_query(source.id, source.field_types)
    asset = next((a for a in datasource.assets if a.name == name), None)
    if asset is None or asset.query != query or overwrite:
        if asset is not None:
            datasource.delete_asset(name)
        asset = datasource.add_query_asset(name=name, query=query)
        # A column-value partition: GX filters with ``day = '<day>'``, which the records'
        # primary key serves (its daily partitioner compares extracted date parts).
        asset.add_batch_definition(BATCH, partitioner=PartitionerColumnValue(column_name="day"),
                                   validate_partitioner=False)
        written.append("asset")
    suite = _get(context.suites, name)
    if suite is None or overwrite:
        suite = context.suites.add_or_update(gx.ExpectationSuite(
            name=name, meta={"source": source.id, "written_by": "stratacrawl expectations init"},
            expectations=[ExpectationConfiguration(type=e["type"], kwargs=e["kwargs"],
                                                   meta=e["meta"]).to_domain_obj()
                          for e in default_expectations(source)]))
        written.append("suite")
    definition = _get(context.validation_definitions, name)
    if definition is None or written:
        definition = context.validation_definitions.add_or_update(gx.ValidationDefinition(
            name=name, data=asset.get_batch_definition(BATCH), suite=suite))
        written.append("validation definition")
    if _get(context.checkpoints, name) is None or written:
        context.checkpoints.add_or_update(gx.Checkpoint(
            name=name, validation_definitions=[definition], result_format="SUMMARY",
            actions=[UpdateDataDocsAction(name="data-docs", site_names=[SITE])]))
        written.append("checkpoint")
    return written


def committed_suite(settings: Settings, source_id: str) -> Any | None:
    """The source's suite as the committed project holds it, or None (no project, or no
    suite for the source yet); reads, never writes."""
    if not config_path(settings).exists():
        return None
    return _get(open_project(settings).suites, suite_name(source_id))
