"""Browser-like request headers with a rotating User-Agent."""

from __future__ import annotations

import random

from stratacrawl.fetch.decode import ACCEPT_ENCODING

USER_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/130.0.0.0 Safari/537.36",
)
ROBOTS_AGENT = "stratacrawl"


def browser_headers(rng: random.Random) -> dict[str, str]:
    return {
        "User-Agent": rng.choice(USER_AGENTS),
        "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,application/json;q=0.8,"
                  "*/*;q=0.5",
        "Accept-Language": rng.choice(("en-US,en;q=0.9", "en-GB,en;q=0.8", "en;q=0.9,de;q=0.5")),
        "Accept-Encoding": ACCEPT_ENCODING,
        "Upgrade-Insecure-Requests": "1",
    }
