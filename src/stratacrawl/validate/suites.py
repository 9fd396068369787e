"""The default suite of a source: what ``stratacrawl expectations init`` writes into the
GX project for a source that has none. Once written, the suite is the committed file
(``expectations/gx/expectations/records/<source>.json``) and is edited there.

Families (each expectation's ``meta.check``):
- count: distinct canonical URLs of the day within ±5 % of the expected count;
- freshness: the newest new record is younger than the source's ``freshness``;
- completeness: each required field present (not null, not empty) in ≥ 98 % of records;
- validity: each present value well-formed for its type (numbers, ISO dates, absolute
  URLs), prices > 0, dates not in the future;
- uniqueness: one record per canonical URL per day.
"""

from __future__ import annotations

from typing import Any

from stratacrawl.cold.records import (
    DATE_RE,
    FIRST_SEEN,
    NUMBER_RE,
    NUMERIC,
    TEMPORAL,
    URL,
    number_column,
    time_column,
)
from stratacrawl.sources import Source
from stratacrawl.validate.checks import (
    URL_RE,
)

COMPLETENESS = 0.98   # a required field may be missing in at most 2 % of records
CHECKS = ("count", "freshness", "completeness", "validity", "uniqueness")


def _exp(type_: str, check: str, **kwargs: Any) -> dict[str, Any]:
    return {"type": type_, "kwargs": kwargs, "meta": {"check": check}}


def _param(name: str) -> dict[str, str]:
    return {"$PARAMETER": name}


def suite_name(source_id: str) -> str:
    return f"records.{source_id}"


def _validity(name: str, kind: str) -> list[dict[str, Any]]:
    regex = ("expect_column_values_to_match_regex", "validity")
    if kind in NUMERIC:
        out = [_exp(*regex, column=name, regex=NUMBER_RE)]
        if kind == "price":
            out.append(_exp("expect_column_values_to_be_between", "validity",
                            column=number_column(name), min_value=0, strict_min=True))
        return out
    if kind in TEMPORAL:
        return [_exp(*regex, column=name, regex=DATE_RE),
                _exp("expect_column_values_to_be_between", "validity",
                     column=time_column(name), max_value=_param("not_after"))]
    if kind == "url":
        return [_exp(*regex, column=name, regex=URL_RE)]
    return []


def default_expectations(source: Source) -> list[dict[str, Any]]:
    exps = [
        _exp("expect_column_unique_value_count_to_be_between", "count", column=URL,
             min_value=_param("min_count"), max_value=_param("max_count")),
        _exp("expect_column_max_to_be_between", "freshness", column=FIRST_SEEN,
             min_value=_param("fresh_after")),
        *(_exp("expect_column_values_to_not_be_null", "completeness", column=f,
               mostly=COMPLETENESS) for f in source.required),
    ]
    for name, kind in source.field_types.items():
        exps += _validity(name, kind)
    exps.append(_exp("expect_column_values_to_be_unique", "uniqueness", column=URL))
    return exps
