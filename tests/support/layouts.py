"""Product pages in layouts the site simulator never renders, for the rule learner: each
page has one product (name, price, SKU, brand, listed date) and distractors of the same
kinds — related products with their own names and prices, a breadcrumb ending in the
name. A layout is one site's build: its markup is the same on every page, its values and
the order of its label rows are not."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

Product = dict[str, Any]
BRANDS = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Stark", "Wayne"]
NOUNS = ["Kettle", "Lamp", "Chair", "Drill", "Blender", "Router", "Backpack", "Monitor"]


def product(rng: random.Random, i: int) -> Product:
    return {"name": f"{rng.choice(BRANDS)} {rng.choice(NOUNS)} {rng.randint(100, 999)}",
            "price": round(rng.uniform(5, 3000), 2), "sku": f"SK-{rng.randint(10000, 99999)}",
            "brand": rng.choice(BRANDS),
            "listed": (date(2026, 1, 1) + timedelta(days=rng.randint(0, 300))).isoformat()}


def _us(price: float) -> str:
    return f"USD {price:,.2f}"


def _eu(price: float) -> str:
    whole, cents = f"{price:,.2f}".split(".")
    return f"{whole.replace(',', '.')},{cents} €"


def _long_date(iso: str) -> str:
    return date.fromisoformat(iso).strftime("%B %-d, %Y")


def _related(rng: random.Random, cls: Callable[[str], str], fmt: Callable[[float], str]) -> str:
    cards = []
    for j in range(3):
        r = product(rng, 1000 + j)
        cards.append(f'<div class="{cls("card")}"><div class="{cls("title")}">{r["name"]}'
                     f'</div><span class="{cls("price")}">{fmt(r["price"])}</span></div>')
    return f'<aside class="{cls("related")}"><h3>Related</h3>{"".join(cards)}</aside>'


def hashed(rng: random.Random, p: Product) -> str:
    """Generated class names (the same on every page of the build), extra wrappers whose
    depth differs per page, the related products in the same markup as the product."""
    names = {k: "".join(random.Random(k).choices("abcdefghjkmnpqrstuvwxyz", k=2)) +
             str(random.Random(k + "1").randint(10, 99)) + "x"
             for k in ("main", "title", "price", "sku", "brand", "card", "related")}

    def cls(k: str) -> str:
        return names[k]

    wrap = "<div>" * rng.randint(0, 3)
    unwrap = "</div>" * wrap.count("<div>")
    return (f'<html><body><nav><a href="/">Home</a> / <a href="/c">Tools</a> / '
            f'<span>{p["name"]}</span></nav>{_related(rng, cls, _us)}'
            f'<main class="{cls("main")}">{wrap}<div class="{cls("title")}">{p["name"]}</div>'
            f'<div><span class="{cls("price")}">{_us(p["price"])}</span></div>'
            f'<p class="{cls("sku")}">{p["sku"]}</p><p class="{cls("brand")}">{p["brand"]}</p>'
            f'{unwrap}</main></body></html>')


def label_table(rng: random.Random, p: Product) -> str:
    """A label/value table whose rows come in a different order on every page; prices
    the European way; related products priced in the same format."""
    rows = [("Name", p["name"]), ("Price", _eu(p["price"])), ("SKU", p["sku"]),
            ("Manufacturer", p["brand"]), ("Listed", _long_date(p["listed"])),
            ("Weight", f"{rng.randint(1, 20)} kg")]
    rng.shuffle(rows)
    table = "".join(f"<tr><th>{k}:</th><td>{v}</td></tr>" for k, v in rows)
    return (f'<html><body><ul class="crumbs"><li>Home</li><li>{p["name"]}</li></ul>'
            f'<h1>Product details</h1><table class="specs">{table}</table>'
            f'{_related(rng, lambda k: k, _eu)}</body></html>')


def microdata(rng: random.Random, p: Product) -> str:
    """Values only in microdata attributes (the visible text is formatted otherwise or
    absent); the related products are microdata products too, after the main one."""
    related = "".join(
        f'<div itemscope itemtype="https://schema.org/Product"><span itemprop="name">'
        f'{r["name"]}</span><div itemprop="offers" itemscope itemtype="https://schema.org/'
        f'Offer"><meta itemprop="price" content="{r["price"]:.2f}"></div></div>'
        for r in (product(rng, 2000 + j) for j in range(3)))
    return (f'<html><body><div itemscope itemtype="https://schema.org/Product">'
            f'<meta itemprop="name" content="{p["name"]}"><h1>{p["name"].upper()}</h1>'
            f'<meta itemprop="sku" content="{p["sku"]}">'
            f'<div itemprop="brand" itemscope itemtype="https://schema.org/Brand">'
            f'<meta itemprop="name" content="{p["brand"]}"></div>'
            f'<div itemprop="offers" itemscope itemtype="https://schema.org/Offer">'
            f'<meta itemprop="price" content="{p["price"]:.2f}"><span>only today!</span></div>'
            f'<meta itemprop="releaseDate" content="{p["listed"]}"></div>'
            f'<section class="related">{related}</section></body></html>')


def jsonld(rng: random.Random, p: Product) -> str:
    """Values only in JSON-LD (the page itself renders them from script); an ItemList of
    related products before the product, and a breadcrumb list naming it."""
    related = {"@context": "https://schema.org", "@type": "ItemList", "itemListElement": [
        {"@type": "ListItem", "position": j + 1, "item": {
            "@type": "Product", "name": r["name"],
            "offers": {"@type": "Offer", "price": f"{r['price']:.2f}"}}}
        for j, r in enumerate(product(rng, 3000 + j) for j in range(3))]}
    crumbs = {"@context": "https://schema.org", "@type": "BreadcrumbList", "itemListElement": [
        {"@type": "ListItem", "position": 1, "name": "Home"},
        {"@type": "ListItem", "position": 2, "name": p["name"]}]}
    main = {"@context": "https://schema.org", "@type": "Product", "name": p["name"],
            "sku": p["sku"], "brand": {"@type": "Brand", "name": p["brand"]},
            "releaseDate": p["listed"],
            "offers": {"@type": "Offer", "price": f"{p['price']:.2f}", "priceCurrency": "USD"}}
    scripts = "".join(f'<script type="application/ld+json">{json.dumps(d)}</script>'
                      for d in (related, crumbs, main))
    return (f'<html><head>{scripts}</head><body><div id="root"></div>'
            f'<script>render()</script></body></html>')


def data_attributes(rng: random.Random, p: Product) -> str:
    """Values in ``data-*`` attributes of otherwise bare elements; the related products
    carry the same attributes, inside their own container, first."""
    related = "".join(
        f'<li data-price="{r["price"]:.2f}"><span data-name="{r["name"]}">{r["name"]}</span></li>'
        for r in (product(rng, 4000 + j) for j in range(3)))
    return (f'<html><body><ul id="recs">{related}</ul>'
            f'<div id="product" data-sku="{p["sku"]}" data-price="{p["price"]:.2f}">'
            f'<span data-name="{p["name"]}">{p["name"]}</span>'
            f'<a href="/brand/{p["brand"].lower()}" data-brand="{p["brand"]}">{p["brand"]}</a>'
            f'<time datetime="{p["listed"]}">{_long_date(p["listed"])}</time></div>'
            f'</body></html>')


LAYOUTS: dict[str, Callable[[random.Random, Product], str]] = {
    "hashed": hashed, "label_table": label_table, "microdata": microdata, "jsonld": jsonld,
    "data_attributes": data_attributes,
}
FIELDS = {"hashed": ("name", "price", "sku", "brand"),
          "label_table": ("name", "price", "sku", "brand", "listed"),
          "microdata": ("name", "price", "sku", "brand", "listed"),
          "jsonld": ("name", "price", "sku", "brand", "listed"),
          "data_attributes": ("name", "price", "sku", "brand", "listed")}


def pages(layout: str, n: int, seed: int = 7) -> list[tuple[str, bytes, Product]]:
    """``n`` (file name, HTML, the product's fields the layout shows) of a layout."""
    rng = random.Random(f"{layout}:{seed}")
    out = []
    for i in range(n):
        p = product(rng, i)
        html = LAYOUTS[layout](rng, p)
        out.append((f"p{i:03d}.html", html.encode(), {k: p[k] for k in FIELDS[layout]}))
    return out
