"""The Scrapy side of ``bench peers``: a spider for the sources of a ``sources.yaml``, as an
experienced Scrapy user writes one for these sites — the same seeds and scope (``allow``,
``follow`` for list pages, ``items`` for item pages; links are read from seed and list
pages only), robots.txt obeyed, each site's concurrency and rate as in the file, every
page written to a JSON-lines feed. Tuned as its users tune it: ``CONCURRENT_ITEMS=1``
(Scrapy's per-response task overhead avoided), the public-suffix list taken from
tldextract's bundled snapshot (no download), no telnet console, INFO logging off.

``python -m bench.peer_spider SOURCES_YAML FEED_JSONL STATS_JSON``
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from scrapy import Request, Spider
from scrapy.crawler import CrawlerProcess
from scrapy.downloadermiddlewares import cookies
from scrapy.http import Response, TextResponse
from tldextract import TLDExtract

from stratacrawl.frontier.links import json_links

# Scrapy's cookie middleware splits domains with tldextract, which would fetch the public
# suffix list over the network first; the bundled snapshot is what an offline crawl uses.
cookies._split_domain = TLDExtract(include_psl_private_domains=True, suffix_list_urls=())

class Site:
    def __init__(self, entry: dict[str, Any]) -> None:
        self.id = entry["id"]
        self.seeds = list(entry.get("seeds") or [])
        self.allow = [re.compile(p) for p in entry.get("allow") or []]
        self.follow = [re.compile(p) for p in entry.get("follow") or []]
        self.items = [re.compile(p) for p in entry.get("items") or []]

    def kind(self, url: str) -> str | None:
        if self.allow and not any(p.search(url) for p in self.allow):
            return None
        if any(p.search(url) for p in self.items):
            return "item"
        if any(p.search(url) for p in self.follow):
            return "list"
        return None


class PeerSpider(Spider):
    name = "peer"

    def __init__(self, sources: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sites = [Site(e) for e in yaml.safe_load(Path(sources).read_text())["sources"]]

    async def start(self) -> Any:  # Scrapy 2.13+: the start requests
        # A site's seeds one after the other: the first page may set the session cookie
        # the others need (fetched at once, they would be refused and never retried).
        for site in self.sites:
            if site.seeds:
                yield Request(site.seeds[0], callback=self.parse_list,
                              cb_kwargs={"site": site, "seeds_left": site.seeds[1:]})

    def parse_list(self, response: Response, site: Site,
                   seeds_left: list[str] | None = None) -> Iterator[Any]:
        yield self.page(response, site, "list")
        for url in seeds_left or ():
            yield Request(url, callback=self.parse_list, cb_kwargs={"site": site},
                          dont_filter=True)
        if not isinstance(response, TextResponse):
            return
        if "json" in response.headers.get("Content-Type", b"").decode().lower():
            hrefs: Any = json_links(response.body)   # the keys Stratacrawl reads links from
        else:
            hrefs = response.css("a::attr(href), link[rel=next]::attr(href)").getall()
        for href in hrefs:
            url = response.urljoin(href)
            kind = site.kind(url)
            if kind == "item":
                yield Request(url, callback=self.parse_item, cb_kwargs={"site": site})
            elif kind == "list":
                yield Request(url, callback=self.parse_list, cb_kwargs={"site": site})

    def parse_item(self, response: Response, site: Site) -> Iterator[Any]:
        yield self.page(response, site, "item")

    def page(self, response: Response, site: Site, kind: str) -> dict[str, Any]:
        return {"source": site.id, "kind": kind, "url": response.url,
                "status": response.status,
                "content_type": response.headers.get("Content-Type", b"").decode(),
                "body": response.text if isinstance(response, TextResponse) else ""}


def settings(feed: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    concurrency = max(int(e.get("concurrency", 4)) for e in entries)
    rate = min(float(e.get("rate", 50.0)) for e in entries)
    return {
        "ROBOTSTXT_OBEY": True,
        "CONCURRENT_REQUESTS": concurrency * len(entries),
        "CONCURRENT_REQUESTS_PER_DOMAIN": concurrency,
        "DOWNLOAD_DELAY": 1.0 / rate,
        "CONCURRENT_ITEMS": 1,
        "FEEDS": {feed: {"format": "jsonlines", "encoding": "utf8"}},
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "RETRY_TIMES": 2,
        "DOWNLOAD_TIMEOUT": 30,
        "REDIRECT_MAX_TIMES": 10,
    }


def main(sources: str, feed: str, stats_path: str) -> None:
    entries = yaml.safe_load(Path(sources).read_text())["sources"]
    process = CrawlerProcess(settings(feed, entries))
    crawler = process.create_crawler(PeerSpider)
    process.crawl(crawler, sources=sources)
    process.start()
    stats = crawler.stats.get_stats() if crawler.stats else {}
    Path(stats_path).write_text(json.dumps(stats, default=str))


if __name__ == "__main__":
    main(*sys.argv[1:4])
