"""Suites: committed Great Expectations 1.x JSON, one per source, in ``expectations/``.

A suite refers to run-time values through ``{"$PARAMETER": name}`` (see ``checks``), so
one committed file serves every day. ``default_suite`` writes what every source gets:
count, freshness (newest record and last successful fetch), completeness of required
fields, unique fingerprints, and value sanity (prices > 0, dates not in the future). Edit
a suite to add expectations; ``stratacrawl expectations init`` writes the missing ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stratacrawl.errors import ConfigError
from stratacrawl.sources import Source, SourcesFile
from stratacrawl.validate.checks import FINGERPRINT, LAST_FETCH, NEWEST, TEMPORAL

COMPLETENESS = 0.98   # a required field may be missing in at most 2 % of records


def _exp(type_: str, check: str, **kwargs: Any) -> dict[str, Any]:
    return {"type": type_, "kwargs": kwargs, "meta": {"check": check}}


def _param(name: str) -> dict[str, str]:
    return {"$PARAMETER": name}


def suite_name(source_id: str) -> str:
    return f"records.{source_id}"


def default_suite(source: Source) -> dict[str, Any]:
    exps = [
        _exp("expect_table_row_count_to_be_between", "count",
             min_value=_param("min_count"), max_value=_param("max_count")),
        _exp("expect_column_max_to_be_between", "freshness", column=NEWEST,
             min_value=_param("fresh_after")),
        _exp("expect_column_max_to_be_between", "freshness", column=LAST_FETCH,
             min_value=_param("fresh_after")),
        *(_exp("expect_column_values_to_not_be_null", "completeness", column=f,
               mostly=COMPLETENESS) for f in source.required),
        _exp("expect_column_values_to_be_unique", "uniqueness", column=FINGERPRINT),
    ]
    for name, kind in source.field_types.items():
        if kind == "price":
            exps.append(_exp("expect_column_values_to_be_between", "sanity", column=name,
                             min_value=0, strict_min=True))
        elif kind in TEMPORAL:
            exps.append(_exp("expect_column_values_to_be_between", "sanity", column=name,
                             max_value=_param("not_after")))
    return {"name": suite_name(source.id), "expectations": exps,
            "meta": {"source": source.id, "written_by": "stratacrawl expectations init"}}


def suite_path(folder: Path, source_id: str) -> Path:
    return folder / f"{suite_name(source_id)}.json"


def load_suite(folder: Path, source: Source) -> tuple[dict[str, Any], bool]:
    """The committed suite of ``source``, or its default (``True`` = not committed)."""
    path = suite_path(folder, source.id)
    if not path.exists():
        return default_suite(source), True
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: not a readable suite: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("expectations"), list):
        raise ConfigError(f"{path}: a suite needs a list under 'expectations'")
    for i, exp in enumerate(doc["expectations"]):
        if not isinstance(exp, dict) or not isinstance(exp.get("type"), str):
            raise ConfigError(f"{path}: expectation #{i + 1} needs a 'type'")
    doc["name"] = suite_name(source.id)
    return doc, False


def write_suites(folder: Path, sources: SourcesFile, *, overwrite: bool = False) -> list[Path]:
    """Write the default suite of every source that has none (or all, with ``overwrite``)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for source in sources.sources:
        path = suite_path(folder, source.id)
        if path.exists() and not overwrite:
            continue
        path.write_text(json.dumps(default_suite(source), indent=2) + "\n", encoding="utf-8")
        written.append(path)
    return written
