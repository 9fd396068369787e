"""Pages of a simulated source: realistic HTML around the item, the JSON API, robots, sitemap.

Everything here is a pure function of (spec, item number, published count, redesign).
"""

from __future__ import annotations

import hashlib
import json
from html import escape

from stratacrawl.sim.content import get_item, item_path, published_at
from stratacrawl.sim.spec import SourceSpec

STYLE = ("<style>body{font-family:Georgia,serif;margin:0;color:#222}header,footer{background:#f4f4f4;"
         "padding:8px 16px}nav a{margin-right:12px}.ad{border:1px dashed #ccc;padding:12px;margin:8px}"
         ".comments{font-size:90%;color:#555}.price{font-weight:bold}</style>")
NAV = ("<nav><a href='/'>Home</a><a href='/about'>About</a><a href='/contact'>Contact</a>"
       "<a href='https://social.example/share'>Share</a><a href='javascript:void(0)'>Menu</a>"
       "<a href='mailto:desk@example.org'>Write to us</a></nav>")
AD = ("<div class='ad' data-slot='{slot}'><script>window.adq=window.adq||[];adq.push({{slot:'{slot}',"
      "size:[300,250]}});</script><a href='https://ads.example/click?c={slot}'>Sponsored</a></div>")


def list_path(spec: SourceSpec, page: int) -> str:
    return {"news": f"/list/{page}", "products": f"/catalog/{page}",
            "prices": f"/api/prices?page={page}"}[spec.kind]


def etag_of(body: bytes) -> str:
    return '"' + hashlib.blake2b(body, digest_size=10).hexdigest() + '"'


def _filler(spec: SourceSpec, k: int, current: int, target: int) -> str:
    """Comments and tracking scripts up to ``target`` bytes (the long tail of page sizes)."""
    missing = target - current
    if missing <= 0:
        return ""
    chunk = (f"<div class='comment' id='c{k}'><b>reader{k % 97}</b><p>Interesting point about "
             f"{spec.id} item {k}; the figures in paragraph two deserve a source.</p></div>")
    script = "<script>var _t={'pv':1,'src':'" + spec.id + "','k':" + str(k) + "};</script>"
    unit = chunk + script
    return "<section class='comments'>" + unit * (missing // len(unit) + 1) + "</section>"


def _page(spec: SourceSpec, title: str, main: str, canonical: str, target: int, k: int) -> bytes:
    head = (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{escape(title)} | {spec.id}</title><link rel='canonical' href='{canonical}'>"
            f"{STYLE}<script src='/static/app.js' defer></script></head><body>"
            f"<header><a class='logo' href='/'>{spec.id}</a>{NAV}</header>"
            f"{AD.format(slot='top')}<main>")
    tail = (f"</main>{AD.format(slot='side')}<footer>&copy; {spec.id} · <a href='/privacy'>Privacy"
            "</a></footer></body></html>")
    html = head + main
    html += _filler(spec, k, len(html) + len(tail), target) + tail
    return html.encode()


def item_html(spec: SourceSpec, k: int, redesign: bool) -> bytes:
    it = get_item(spec, k)
    f = it.fields
    canonical = spec.base_url + item_path(spec, k)
    if spec.kind == "news":
        paras = "".join(f"<p>{escape(p)}</p>" for p in f["text"].split("\n\n"))
        if redesign:
            main = (f"<div class='story-v2'><div class='story-title'><span>{escape(f['title'])}"
                    f"</span></div><div class='meta-v2' data-writer='{escape(f['author'])}' "
                    f"data-ts='{f['published']}'></div><section class='story-body'>{paras}"
                    "</section></div>")
        else:
            main = (f"<article><h1 class='headline'>{escape(f['title'])}</h1>"
                    f"<div class='byline'>By <span class='author'>{escape(f['author'])}</span> "
                    f"<time datetime='{f['published']}'>{f['published'][:10]}</time></div>"
                    f"<div class='article-body'>{paras}</div></article>")
        return _page(spec, f["title"], main, canonical, it.size_hint, k)
    stock = "Out of stock" if f["stock"] == 0 else f"{f['stock']} in stock"
    if redesign:
        main = (f"<div class='pdp-v2'><h2 class='pdp-title'>{escape(f['name'])}</h2>"
                f"<div class='cost' data-cost='{f['price']:.2f}' data-ccy='{f['currency']}'></div>"
                f"<div class='avail' data-qty='{f['stock']}'></div></div>")
    else:
        main = (f"<div class='product'><h1 class='name'>{escape(f['name'])}</h1>"
                f"<span class='price' data-currency='{f['currency']}'>{f['currency']} "
                f"{f['price']:,.2f}</span><div class='stock' data-stock='{f['stock']}'>{stock}</div>"
                f"<div class='description'><p>A dependable {escape(f['name'].lower())}.</p></div>"
                "</div>")
    return _page(spec, f["name"], main, canonical, it.size_hint, k)


def _variants(spec: SourceSpec, k: int) -> str:
    """The link to item ``k`` as a list page shows it: sometimes a duplicate URL."""
    path = item_path(spec, k)
    if spec.behaviour.duplicates:
        if k % 7 == 3:
            return f"{path}?utm_source=list&utm_medium=web&ref={k % 5}"
        if k % 11 == 5:
            return f"{path};jsessionid={hashlib.md5(str(k).encode()).hexdigest()[:16].upper()}"
        if k % 13 == 6:
            return f"{path}/index.html"
    return path


def list_html(spec: SourceSpec, page: int, count: int) -> bytes | None:
    """List page ``page`` (newest items first); ``None`` past the last page."""
    newest = count - 1 - (page - 1) * spec.page_size
    if newest < 0 and page > 1:
        return None
    ks = range(newest, max(newest - spec.page_size, -1), -1)
    links = "".join(
        f"<li><a class='item-link' href='{_variants(spec, k)}'>{escape(str(_label(spec, k)))}</a>"
        f"</li>" for k in ks)
    nav = ""
    if page > 1:
        nav += f"<a rel='prev' href='{list_path(spec, page - 1)}'>Newer</a> "
    if newest - spec.page_size >= 0:
        nav += f"<a rel='next' href='{list_path(spec, page + 1)}'>Older</a>"
    traps = ""
    if page == 1 and spec.behaviour.traps and ks:
        k0 = ks[0]
        traps = (f"<div class='more'><a href='/old{item_path(spec, k0)}'>Moved story</a> "
                 f"<a href='/loop/a'>Archive</a> <a href='/private/{k0}'>Members</a> "
                 f"<a href='/download/feed.html'>Full feed</a> "
                 f"<a href='/download/archive.html'>Archive</a> "
                 f"<a href='/media/banner.jpg'>Banner</a> "
                 f"<a href='/broken/page.html'>Print</a></div>")
    main = f"<h1>Page {page}</h1><ul class='items'>{links}</ul>{traps}<div class='pager'>{nav}</div>"
    return _page(spec, f"Page {page}", main, spec.base_url + list_path(spec, page), 20_000, page)


def _label(spec: SourceSpec, k: int) -> str:
    f = get_item(spec, k).fields
    return str(f.get("title") or f.get("name") or f.get("symbol"))


def home_html(spec: SourceSpec) -> bytes:
    main = (f"<h1>{spec.id}</h1><p>Latest from {spec.id}.</p>"
            f"<a class='start' href='{list_path(spec, 1)}'>Latest</a>")
    return _page(spec, spec.id, main, spec.base_url + "/", 12_000, 0)


def price_json(spec: SourceSpec, k: int) -> bytes:
    f = get_item(spec, k).fields
    doc = {"id": k, "url": spec.base_url + item_path(spec, k), **f}
    if spec.behaviour.redesign:
        doc = {"data": {"instrument": {"ticker": f["symbol"]},
                        "quote": {"value": f["price"], "ccy": f["currency"]}}, "id": k}
    return json.dumps(doc).encode()


def prices_page_json(spec: SourceSpec, page: int, count: int) -> bytes | None:
    newest = count - 1 - (page - 1) * spec.page_size
    if newest < 0 and page > 1:
        return None
    ks = range(newest, max(newest - spec.page_size, -1), -1)
    items = [{"id": k, "url": spec.base_url + item_path(spec, k)} for k in ks]
    nxt = list_path(spec, page + 1) if newest - spec.page_size >= 0 else None
    return json.dumps({"page": page, "items": items, "next": nxt}).encode()


def robots_txt(spec: SourceSpec) -> bytes:
    lines = ["User-agent: *", *(f"Disallow: {p}" for p in spec.behaviour.disallow)]
    if spec.behaviour.crawl_delay:
        lines.append(f"Crawl-delay: {spec.behaviour.crawl_delay:g}")
    lines += ["", f"Sitemap: {spec.base_url}/sitemap.xml", ""]
    return "\n".join(lines).encode()


def sitemap_xml(spec: SourceSpec, count: int) -> bytes:
    urls = "".join(
        f"<url><loc>{spec.base_url}{item_path(spec, k)}</loc>"
        f"<lastmod>{published_at(spec, k).strftime('%Y-%m-%dT%H:%M:%SZ')}</lastmod></url>"
        for k in range(count - 1, -1, -1))
    return ("<?xml version='1.0' encoding='UTF-8'?>"
            "<urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>" + urls + "</urlset>"
            ).encode()
