"""Turn extracted strings into typed values. A value that cannot be coerced is missing
(``None``), so the required-field check, not an exception, decides what it means."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import urljoin

from dateutil import parser as dateparser
from dateutil import tz
from price_parser import Price

_SPACE = re.compile(r"\s+")
# Numbers no locale reads two ways — digits, or digits with one or two decimals after a
# dot (``1.234`` is not one: price-parser reads it as 1234, a thousands separator) —
# alone or with a currency code or sign before or after ("EUR 515.69", "$5", "9.90 €"):
# most prices on product pages, read without price-parser's pattern search.
_PLAIN_PRICE = re.compile(r"(?:[A-Z]{3} ?|[$€£¥] ?)?(\d+(?:\.\d{1,2})?)(?: ?[A-Z]{3}| ?[$€£¥])?")


def text(value: Any, base_url: str = "") -> str | None:
    if value is None:
        return None
    out = _SPACE.sub(" ", str(value)).strip()
    return out or None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    s = text(value)
    if s is None:
        return None
    plain = _PLAIN_PRICE.fullmatch(s)
    if plain is not None:
        return float(plain.group(1))
    price = Price.fromstring(s)  # knows 1,234.50 from 1.234,50 and stray currency signs
    return float(price.amount) if price.amount is not None else None


def integer(value: Any, base_url: str = "") -> int | None:
    n = _number(value)
    return int(n) if n is not None and n == int(n) else None


def number(value: Any, base_url: str = "") -> float | None:
    return _number(value)


def price(value: Any, base_url: str = "") -> float | None:
    n = _number(value)
    return round(n, 4) if n is not None else None


# Time-zone abbreviations news pages use, as fixed offsets (hours). An abbreviation is
# ambiguous in general (IST: India, Ireland, Israel; CST: US Central, China); these are
# the readings the web mostly means. Others are counted (take_unknown_timezones) and the
# time is read as UTC — dateutil would warn on every such date instead.
TZ_ABBREVIATIONS_H: dict[str, float] = {
    "UT": 0, "UTC": 0, "GMT": 0, "Z": 0, "WET": 0, "WEST": 1, "BST": 1, "CET": 1, "CEST": 2,
    "MET": 1, "MEST": 2, "EET": 2, "EEST": 3, "MSK": 3, "IST": 5.5, "PKT": 5, "ICT": 7,
    "WIB": 7, "HKT": 8, "SGT": 8, "PHT": 8, "AWST": 8, "JST": 9, "KST": 9, "ACST": 9.5,
    "ACDT": 10.5, "AEST": 10, "AEDT": 11, "NZST": 12, "NZDT": 13, "HST": -10, "AKST": -9,
    "AKDT": -8, "PST": -8, "PDT": -7, "MST": -7, "MDT": -6, "CST": -6, "CDT": -5,
    "EST": -5, "EDT": -4, "AST": -4, "ADT": -3, "NST": -3.5, "NDT": -2.5, "BRT": -3,
    "ART": -3,
}
_TZINFOS = {name: tz.tzoffset(name, int(hours * 3600))
            for name, hours in TZ_ABBREVIATIONS_H.items()}
_unknown_timezones: Counter[str] = Counter()


def _tzinfo(name: str | None, offset: int | None) -> Any:
    """dateutil's ``tzinfos`` hook: an explicit offset wins, then the table above; an
    abbreviation it does not know is counted and left naive (read as UTC)."""
    if offset is not None:
        return tz.tzoffset(name, offset)
    if name is None:
        return None
    known = _TZINFOS.get(name.upper())
    if known is None:
        _unknown_timezones[name] += 1
    return known


def take_unknown_timezones() -> Counter[str]:
    """The abbreviations not understood since the last call (then forgotten)."""
    taken = Counter(_unknown_timezones)
    _unknown_timezones.clear()
    return taken


def _parse_dt(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, date):
        dt = datetime(value.year, value.month, value.day)
    else:
        s = text(value)
        if s is None:
            return None
        try:
            dt = datetime.fromisoformat(s)
        except ValueError:
            try:
                dt = dateparser.parse(s, tzinfos=_tzinfo)
            except (ValueError, OverflowError):
                return None
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def date_value(value: Any, base_url: str = "") -> str | None:
    dt = _parse_dt(value)
    return dt.date().isoformat() if dt else None


def datetime_value(value: Any, base_url: str = "") -> str | None:
    """ISO 8601 in UTC with a ``Z`` (what JSON consumers and PostgreSQL both read)."""
    dt = _parse_dt(value)
    return dt.isoformat().replace("+00:00", "Z") if dt else None


def url(value: Any, base_url: str = "") -> str | None:
    s = text(value)
    return urljoin(base_url, s) if s else None


COERCE: dict[str, Callable[[Any, str], Any]] = {
    "text": text, "int": integer, "float": number, "price": price, "date": date_value,
    "datetime": datetime_value, "url": url,
}


def coerce(kind: str, value: Any, base_url: str = "") -> Any:
    return COERCE[kind](value, base_url)
