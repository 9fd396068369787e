"""Turn extracted strings into typed values. A value that cannot be coerced is missing
(``None``), so the required-field check, not an exception, decides what it means."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import urljoin

from dateutil import parser as dateparser
from price_parser import Price

_SPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"[-+]?\d[\d,.\s']*")


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
                dt = dateparser.parse(s)
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
