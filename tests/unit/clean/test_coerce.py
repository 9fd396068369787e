"""Dates with time-zone abbreviations: the common ones read with their offset, the others
counted (and read as UTC) — never a library warning on the terminal."""

from __future__ import annotations

import warnings

import pytest

from stratacrawl.clean.coerce import datetime_value, take_unknown_timezones

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("text", "utc"), [
    ("Mon, 30 Nov 2026 10:00:00 EST", "2026-11-30T15:00:00Z"),
    ("30 Nov 2026 10:00 PDT", "2026-11-30T17:00:00Z"),
    ("30 Nov 2026 10:00 CEST", "2026-11-30T08:00:00Z"),
    ("30 Nov 2026 10:00 IST", "2026-11-30T04:30:00Z"),
    ("30 Nov 2026 10:00 GMT", "2026-11-30T10:00:00Z"),
    ("Nov 30 2026 10:00 +0530", "2026-11-30T04:30:00Z"),
    ("November 30, 2026", "2026-11-30T00:00:00Z"),
])
def test_common_abbreviations_are_read_with_their_offset(text: str, utc: str) -> None:
    take_unknown_timezones()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # dateutil's UnknownTimezoneWarning would raise here
        assert datetime_value(text) == utc
    assert take_unknown_timezones() == {}


def test_an_unknown_abbreviation_is_counted_not_warned() -> None:
    take_unknown_timezones()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert datetime_value("30 Nov 2026 10:00 XYZT") == "2026-11-30T10:00:00Z"
        assert datetime_value("1 Dec 2026 08:00 XYZT") == "2026-12-01T08:00:00Z"
    assert take_unknown_timezones() == {"XYZT": 2}
    assert take_unknown_timezones() == {}  # taken once
