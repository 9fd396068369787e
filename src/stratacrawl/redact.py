"""Secrets out of anything shown: URLs of every tier in every form they are written in.

Covered: a password in the userinfo (``redis://:pw@h``, ``https://u:pw@es:9200``), in the
query (``?password=pw``, ``?api_key=…``, ``?sslpassword=…``) and in libpq's ``key=value``
form (``host=h password=pw`` or ``password='p w'``). ``redact_text`` applies the same rules
inside any message (log lines, exception texts that quote a connection string).
"""

from __future__ import annotations

import logging
import re

MASK = "***"
# Keys whose values are secrets, in a query string or a libpq key=value string.
SECRET_KEYS = r"(?:password|passwd|pwd|pass|sslpassword|secret|token|api_key|apikey|access_token)"
_USERINFO = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@?#]*:)(?P<pw>[^@\s/]*)@")
_QUERY = re.compile(rf"(?P<head>[?&;]{SECRET_KEYS}=)(?P<pw>[^&#\s]*)", re.IGNORECASE)
_KEYVALUE = re.compile(
    rf"(?P<head>(?:^|(?<=[\s'\"(,])){SECRET_KEYS}\s*=\s*)(?P<pw>'(?:[^'\\]|\\.)*'?|[^\s'\"),]+)",
    re.IGNORECASE)


def redact_text(text: str) -> str:
    """``text`` with every password-like value replaced by ``***``."""
    if not text:
        return text
    text = _USERINFO.sub(lambda m: m["head"] + MASK + "@", text)
    text = _QUERY.sub(lambda m: m["head"] + MASK, text)
    return _KEYVALUE.sub(lambda m: m["head"] + MASK, text)


def redact(url: str) -> str:
    """A connection URL (or libpq string) without its secrets, for messages and logs."""
    return redact_text(url)


class RedactingFilter(logging.Filter):
    """Redacts each record's message (after formatting its arguments) in place: a
    library logging its connection string at DEBUG must not print the password."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to the formatter's own error
            return True
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True
