"""A ``sources.yaml`` that crawls the simulated sources: what a user would write for them."""

from __future__ import annotations

from typing import Any

from stratacrawl.sim.spec import SourceSpec


def source_entry(spec: SourceSpec, rate: float = 50.0, concurrency: int = 4,
                 cadence: str = "10m", max_interval: str | None = None,
                 alert_min_requests: int | None = None) -> dict[str, Any]:
    """The source's entry; ``cadence`` and ``max_interval`` bound how often its lists are
    fetched again, ``alert_min_requests`` how many requests its rate alerts judge (the
    default 20 when None)."""
    base = spec.base_url.replace(".", r"\.")
    entry: dict[str, Any] = {
        "id": spec.id, "allow": [f"^{base}/"], "rate": rate, "concurrency": concurrency,
        "batch_size": 20, "cadence": cadence, "allow_private_networks": True, "freshness": "6h",
    }
    if max_interval is not None:
        entry["recrawl"] = {"max_interval": max_interval}
    if alert_min_requests is not None:
        entry["alerts"] = {"min_requests": alert_min_requests}
    if spec.kind == "news":
        entry.update(seeds=[f"{spec.base_url}/list/1"], follow=[r"/list/\d+$"],
                     items=[r"/article/\d+"], extract={"kind": "article"},
                     required=["title", "text", "author", "published"])
    elif spec.kind == "products":
        entry.update(seeds=[f"{spec.base_url}/", f"{spec.base_url}/catalog/1"],
                     follow=[r"/catalog/\d+$"], items=[r"/product/\d+"], required=["name", "price"],
                     extract={"kind": "rules", "fields": {
                         "name": {"css": "h1.name"},
                         "price": {"css": "span.price", "type": "price"},
                         "currency": {"css": "span.price", "attr": "data-currency"},
                         "stock": {"css": "div.stock", "attr": "data-stock", "type": "int"}}})
    else:
        entry.update(seeds=[f"{spec.base_url}/api/prices?page=1"], follow=[r"/api/prices\?page=\d+$"],
                     items=[r"/api/prices/\d+$"], extract={"kind": "json", "fields": {
                         "symbol": {"path": "symbol"}, "price": {"path": "price", "type": "price"},
                         "currency": {"path": "currency"},
                         "updated": {"path": "updated", "type": "datetime"}}},
                     required=["symbol", "price", "currency"])
    return entry


def sources_document(specs: list[SourceSpec], **kwargs: Any) -> dict[str, Any]:
    return {"sources": [source_entry(s, **kwargs) for s in specs]}
