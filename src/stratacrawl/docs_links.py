"""Where a Data Docs page can be opened: GX names its pages by ``file://`` URL, which a
browser will not open from a web page (the Prefect UI, the ops page, an alert's e-mail).
When the Data Docs folder is served over HTTP — by the ops server under ``/docs/``, which
``stratacrawl up`` starts — a page's link is its address there."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote, unquote, urlsplit


def served_at(site_url: str | None, docs_dir: Path, base_url: str | None) -> str | None:
    """``site_url`` (a Data Docs page, ``file://``) at ``base_url`` (where ``docs_dir`` is
    served, e.g. ``http://127.0.0.1:8090/docs/``, or ``/docs/`` on the ops server itself);
    unchanged when there is no base, or it is no file under ``docs_dir``."""
    if not site_url or not base_url or not site_url.startswith("file://"):
        return site_url
    path = Path(unquote(urlsplit(site_url).path))
    try:
        relative = path.resolve().relative_to(docs_dir.resolve())
    except ValueError:
        return site_url
    return base_url.rstrip("/") + "/" + quote(relative.as_posix())
