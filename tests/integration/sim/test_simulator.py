"""The simulator over real HTTP: determinism, behaviours, ground truth."""

from __future__ import annotations

import gzip
import re
import time
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime
from urllib.parse import urljoin, urlsplit

import brotli
import httpx
import pytest
from protego import Protego

from stratacrawl.sim import Behaviour, SimulatorThread, build_specs
from stratacrawl.sim.spec import SourceSpec
from tests.support.hosts import hosts

pytestmark = pytest.mark.integration
EPOCH = datetime(2026, 11, 30, 4, 0, tzinfo=UTC)


@pytest.fixture
def site() -> Iterator[tuple[SimulatorThread, list[SourceSpec]]]:
    specs = build_specs(3, 7, epoch=EPOCH, first_host=hosts())
    # A frozen clock: a source publishes an item a minute, so a walk that spans a minute
    # boundary would otherwise find one item more than the truth taken before it.
    frozen = datetime.now(UTC)
    with SimulatorThread(specs, clock=lambda: frozen) as st:
        yield st, specs


def _pages(specs: list[SourceSpec]) -> list[bytes]:
    out = []
    with httpx.Client(headers={"Accept-Encoding": "identity"}, follow_redirects=True) as c:
        for s in specs:
            for path in ("/", "/robots.txt", "/sitemap.xml", "/list/1", "/article/3",
                         "/catalog/2", "/product/9", "/api/prices?page=1", "/api/prices/4"):
                r = c.get(s.base_url + path)
                out.append(r.status_code.to_bytes(2, "big") + r.content.replace(
                    s.base_url.encode(), b"BASE"))
    return out


def test_same_seed_is_byte_identical_other_seed_differs() -> None:
    runs = []
    for seed in (7, 7, 8):
        specs = build_specs(3, seed, epoch=EPOCH, first_host=hosts())
        with SimulatorThread(specs):
            runs.append(_pages(specs))
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def _links(base: str, html: str) -> list[str]:
    return [urljoin(base, h) for h in re.findall(r"href='([^']+)'", html)]


def _canonical(html: str) -> str | None:
    m = re.search(r"<link rel='canonical' href='([^']+)'", html)
    return m.group(1) if m else None


def _walk(spec: SourceSpec) -> set[str]:
    """Breadth-first over list pages, as a crawler would; returns canonical item URLs."""
    found: set[str] = set()
    item_re = re.compile(r"/(article|product)/\d+")
    with httpx.Client(follow_redirects=True, timeout=10) as c:
        c.get(spec.base_url + "/")  # picks up the session cookie where needed
        if spec.kind == "prices":
            url: str | None = spec.base_url + "/api/prices?page=1"
            while url:
                doc = c.get(url).json()
                found |= {it["url"] for it in doc["items"]}
                url = spec.base_url + doc["next"] if doc["next"] else None
            return found
        queue = [spec.base_url + ("/list/1" if spec.kind == "news" else "/catalog/1")]
        seen: set[str] = set()
        while queue:
            url = queue.pop()
            if url in seen:
                continue
            seen.add(url)
            r = c.get(url)
            assert r.status_code == 200, url
            for link in _links(url, r.text):
                if urlsplit(link).netloc != urlsplit(spec.base_url).netloc:
                    continue
                if re.search(r"/(list|catalog)/\d+$", link):
                    queue.append(link)
                elif item_re.search(link) and not link.startswith(spec.base_url + "/old"):
                    page = c.get(link)
                    assert page.status_code == 200, link
                    canonical = _canonical(page.text)
                    assert canonical is not None
                    found.add(canonical)
    return found


@pytest.mark.slow
def test_walking_each_source_finds_exactly_the_ground_truth(site) -> None:
    st, specs = site
    truth = st.sim.truth()
    for spec in specs:
        expected = {it["url"] for it in truth[spec.id]}
        assert _walk(spec) == expected, spec.id
    served = httpx.get(specs[0].base_url + "/_sim/truth").json()["items"]
    assert [it["url"] for it in served] == [it["url"] for it in truth[specs[0].id]]


def test_new_items_appear_and_list_pages_change(site) -> None:
    st, specs = site
    news = specs[0]
    first = httpx.get(news.base_url + "/list/1")
    before = len(st.sim.truth()[news.id])
    st.sim.advance(news.publish_every_s * 3)
    second = httpx.get(news.base_url + "/list/1", headers={"If-None-Match": first.headers["etag"]})
    assert second.status_code == 200 and second.text != first.text
    assert len(st.sim.truth()[news.id]) == before + 3


@pytest.mark.parametrize("oversized", [False, True])
def test_conditional_requests_and_compression(site, oversized: bool) -> None:
    """Also for pages of megabytes, which are built and compressed on a thread."""
    st, specs = site
    if oversized:
        st.sim.servers[specs[0].id].control({"oversized_rate": 1.0})
    url = specs[0].base_url + "/article/10"
    raw = httpx.get(url, headers={"Accept-Encoding": "br"})
    assert raw.headers["content-encoding"] == "br"
    identity = httpx.get(url, headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in identity.headers
    assert (len(identity.content) > 1_000_000) == oversized
    with httpx.Client() as c:
        for enc, decode in (("gzip", gzip.decompress), ("br", brotli.decompress)):
            with c.stream("GET", url, headers={"Accept-Encoding": enc}) as r:
                assert r.headers["content-encoding"] == enc
                packed = b"".join(r.iter_raw())
            assert len(packed) < len(identity.content)
            assert decode(packed) == identity.content
    assert raw.content == identity.content  # httpx decodes br itself
    assert httpx.get(url, headers={"If-None-Match": identity.headers["etag"]}).status_code == 304
    assert httpx.get(url, headers={"If-Modified-Since": identity.headers["last-modified"]}
                     ).status_code == 304
    assert httpx.get(url, headers={"If-None-Match": '"other"'}).status_code == 200


def test_robots_and_sitemap_parse(site) -> None:
    st, specs = site
    news = specs[0]
    st.sim.servers[news.id].control({"crawl_delay": 0.5})
    robots = Protego.parse(httpx.get(news.base_url + "/robots.txt").text)
    assert not robots.can_fetch(news.base_url + "/private/3", "stratacrawl")
    assert robots.can_fetch(news.base_url + "/article/3", "stratacrawl")
    assert robots.crawl_delay("stratacrawl") == 0.5
    sitemaps = list(robots.sitemaps)
    assert sitemaps == [news.base_url + "/sitemap.xml"]
    tree = ET.fromstring(httpx.get(sitemaps[0]).content)
    ns = {"sm": "http://www.sitemaps.org/schemas/sitemap/0.9"}
    locs = {e.text for e in tree.findall("sm:url/sm:loc", ns)}
    assert locs == {it["url"] for it in st.sim.truth()[news.id]}


def test_rate_limit_answers_429_with_retry_after() -> None:
    specs = build_specs(1, 7, epoch=EPOCH, first_host=hosts(), behaviour=Behaviour(rate_limit=5))
    with SimulatorThread(specs), httpx.Client() as c:
        statuses = [c.get(specs[0].base_url + "/article/1") for _ in range(30)]
    limited = [r for r in statuses if r.status_code == 429]
    assert limited and limited[0].headers["retry-after"] == "1"
    assert any(r.status_code == 200 for r in statuses)


def test_redesign_changes_structure_not_status(site) -> None:
    st, specs = site
    news, products, prices = specs
    before = httpx.get(news.base_url + "/article/3")
    p_before = httpx.get(products.base_url + "/product/3", follow_redirects=True)
    for s in specs:
        st.sim.servers[s.id].control({"redesign": True})
    after = httpx.get(news.base_url + "/article/3")
    p_after = httpx.get(products.base_url + "/product/3", follow_redirects=True)
    assert before.status_code == after.status_code == 200
    assert "class='headline'" in before.text and "class='headline'" not in after.text
    assert "class='price'" in p_before.text and "class='price'" not in p_after.text
    assert p_after.status_code == 200
    redesigned = httpx.get(prices.base_url + "/api/prices/3")
    assert redesigned.status_code == 200
    assert "symbol" not in redesigned.json() and "value" in redesigned.json()["data"]["quote"]


def test_session_cookie_is_required_where_configured(site) -> None:
    _, specs = site
    products = specs[1]
    assert products.behaviour.require_session
    url = products.base_url + "/product/2"
    bare = httpx.get(url)
    assert bare.status_code == 302 and "sim_session" in bare.headers["set-cookie"]
    with httpx.Client(follow_redirects=True) as jar:
        assert jar.get(url).status_code == 200
        assert "sim_session" in jar.cookies


def test_traps_redirect_chain_loop_bomb(site) -> None:
    _, specs = site
    base = specs[0].base_url
    with httpx.Client(follow_redirects=True, max_redirects=5) as c:
        r = c.get(base + "/old/article/4")
        assert r.status_code == 200 and [h.status_code for h in r.history] == [301, 302]
        with pytest.raises(httpx.TooManyRedirects):
            c.get(base + "/loop/a")
        with c.stream("GET", base + "/download/feed.html") as bomb:
            assert bomb.headers["content-encoding"] == "gzip"
            compressed = b"".join(bomb.iter_raw())
    assert len(compressed) < 1_000_000
    inflated = zlib.decompressobj(31).decompress(compressed, 10_000_000)
    assert len(inflated) == 10_000_000 and set(inflated) == {0}


def test_faults_5xx_resets_hangs() -> None:
    specs = build_specs(1, 7, epoch=EPOCH, first_host=hosts(),
                        behaviour=Behaviour(error_rate=0.3, reset_rate=0.1))
    with SimulatorThread(specs), httpx.Client(timeout=5) as c:
        outcomes = []
        for _ in range(60):
            try:
                outcomes.append(c.get(specs[0].base_url + "/article/1").status_code)
            except httpx.TransportError:
                outcomes.append("reset")
    assert "reset" in outcomes
    assert {500, 502, 503} & set(outcomes)
    assert 200 in outcomes
    hang = build_specs(1, 7, epoch=EPOCH, first_host=hosts(),
                       behaviour=Behaviour(hang_rate=1.0, hang_s=5))
    with SimulatorThread(hang):
        t0 = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(hang[0].base_url + "/article/1", timeout=0.5)
        assert time.monotonic() - t0 < 3


def test_duplicate_urls_serve_the_same_item(site) -> None:
    _, specs = site
    base = specs[0].base_url
    with httpx.Client(headers={"Accept-Encoding": "identity"}) as c:
        bodies = {c.get(base + p).content for p in (
            "/article/6", "/article/6?utm_source=x&utm_medium=y", "/article/6;jsessionid=ABC123",
            "/article/6/index.html")}
    assert len(bodies) == 1


def test_stats_report_the_seconds_its_own_loop_stalled(site) -> None:
    """A stall of the simulator's loop stamps the requests that came during it late; its
    stats say which seconds that was (the load test reads them beside the arrivals)."""
    st, specs = site
    url = f"http://{specs[0].host}:{specs[0].port}/_sim/stats"
    before = httpx.get(url).json()["loop_lag_ms"]
    assert all(ms < 250 for ms in before.values())
    st.loop.call_soon_threadsafe(time.sleep, 0.4)   # a handler that holds the loop
    time.sleep(0.6)
    after = httpx.get(url).json()["loop_lag_ms"]
    stalled = {int(k): v for k, v in after.items() if v >= 300}
    assert len(stalled) == 1, after
    assert abs(next(iter(stalled)) - time.time()) < 5
