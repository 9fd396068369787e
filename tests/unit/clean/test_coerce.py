"""Dates with time-zone abbreviations: the common ones read with their offset, the others
counted (and read as UTC) — never a library warning on the terminal; numbers as
price-parser reads them."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratacrawl.clean.coerce import datetime_value, take_unknown_timezones
from tests.support.examples import examples

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


@settings(max_examples=examples(1500), deadline=None)
@given(st.one_of(
    st.from_regex(r"\A[0-9]{1,7}(\.[0-9]{1,4})?\Z"),
    st.from_regex(r"\A ?[0-9]{1,3}([,. '][0-9]{3})*([.,][0-9]{1,3})? ?\Z"),
    st.from_regex(r"\A(EUR|\$|€) ?[0-9]{1,4}([.,][0-9]{1,3})?\Z"),
))
def test_plain_numbers_skip_the_price_parser_and_read_the_same(raw: str) -> None:
    """The shortcut for plain numbers (digits, at most two decimals) agrees with
    price-parser on every string; ``1.234`` (three decimals) is left to it."""
    from price_parser import Price

    from stratacrawl.clean.coerce import number

    amount = Price.fromstring(" ".join(raw.split())).amount
    assert number(raw) == (float(amount) if amount is not None else None)
