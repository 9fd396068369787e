"""Data Docs that render with no network.

Great Expectations' page templates load Bootstrap, bootstrap-table, jQuery, Popper, Font
Awesome, the datepicker, the dark theme and Vega from public CDNs, and the GX logo from a
public bucket: offline, or in a locked-down network, the index page is empty and unstyled.
Here the same files, at the versions the templates name, are vendored from their npm
packages into ``datadocs_static/static/vendor/`` (``python -m stratacrawl.validate.datadocs``
fetches them again; ``MANIFEST.json`` lists package, version and checksum of each), and:

- ``OfflineSiteBuilder`` (the ``class_name`` of the ``stratacrawl`` site in
  ``great_expectations.yml``) renders every page with the views below and copies the vendored
  files into the site's ``static/`` folder through the site's own store backend (a local
  folder, S3, …), next to GX's own static files;
- the views read GX's templates through ``OfflineLoader``, which points each CDN address at
  the vendored copy, relative to the page (pages open from ``file://`` as well as from a web
  server), and the logo at GX's own copy in ``static/images/``.

The mapping is checked by a test that renders the pages and finds no remote asset left.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from great_expectations.render.renderer.site_builder import SiteBuilder
from great_expectations.render.view import DefaultJinjaIndexPageView, DefaultJinjaPageView
from jinja2 import BaseLoader, Environment, pass_context
from jinja2.runtime import Context

STATIC_ROOT = Path(__file__).with_name("datadocs_static")   # holds static/vendor/...
VENDOR = STATIC_ROOT / "static" / "vendor"

# npm package, version, files kept (paths inside the package) — the versions GX's templates ask for.
PACKAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "bootstrap": ("4.3.1", ("dist/css/bootstrap.min.css", "dist/js/bootstrap.min.js")),
    "bootstrap-table": ("1.19.1", (
        "dist/bootstrap-table.min.css", "dist/bootstrap-table.min.js",
        "dist/extensions/filter-control/bootstrap-table-filter-control.min.css",
        "dist/extensions/filter-control/bootstrap-table-filter-control.min.js")),
    "bootstrap-datepicker": ("1.9.0", ("dist/css/bootstrap-datepicker.min.css",
                                       "dist/js/bootstrap-datepicker.min.js")),
    "@forevolve/bootstrap-dark": ("1.1.0", ("dist/css/bootstrap-prefers-dark.css",)),
    "@fortawesome/fontawesome-free": ("6.6.0", (
        "css/all.min.css", *(f"webfonts/fa-{w}.{ext}" for w in
                             ("brands-400", "regular-400", "solid-900", "v4compatibility")
                             for ext in ("woff2",)))),  # all.min.css tries woff2 first
    "jquery": ("3.7.1", ("dist/jquery.min.js",)),
    "popper.js": ("1.12.9", ("dist/umd/popper.min.js",)),
    "vega": ("5.33.1", ("build/vega.min.js",)),
    "vega-lite": ("5.23.0", ("build/vega-lite.min.js",)),
    "vega-embed": ("6.29.0", ("build/vega-embed.min.js",)),
}

# Each remote address in GX's templates → the vendored file (package, path).
REMOTE: dict[str, tuple[str, str]] = {
    "https://cdn.jsdelivr.net/npm/vega@5": ("vega", "build/vega.min.js"),
    "https://cdn.jsdelivr.net/npm/vega-lite@5": ("vega-lite", "build/vega-lite.min.js"),
    "https://cdn.jsdelivr.net/npm/vega-embed@6": ("vega-embed", "build/vega-embed.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/font-awesome/6.6.0/css/all.min.css":
        ("@fortawesome/fontawesome-free", "css/all.min.css"),
    "https://code.jquery.com/jquery-3.7.1.min.js": ("jquery", "dist/jquery.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/popper.js/1.12.9/umd/popper.min.js":
        ("popper.js", "dist/umd/popper.min.js"),
    "https://stackpath.bootstrapcdn.com/bootstrap/4.3.1/js/bootstrap.min.js":
        ("bootstrap", "dist/js/bootstrap.min.js"),
    "https://maxcdn.bootstrapcdn.com/bootstrap/4.3.1/css/bootstrap.min.css":
        ("bootstrap", "dist/css/bootstrap.min.css"),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.js":
        ("bootstrap-table", "dist/bootstrap-table.min.js"),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css":
        ("bootstrap-table", "dist/bootstrap-table.min.css"),
    "https://unpkg.com/bootstrap-table@1.19.1/dist/extensions/filter-control/"
    "bootstrap-table-filter-control.min.js":
        ("bootstrap-table", "dist/extensions/filter-control/bootstrap-table-filter-control.min.js"),
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/"
    "bootstrap-table-filter-control.min.css":
        ("bootstrap-table", "dist/extensions/filter-control/bootstrap-table-filter-control.min.css"),
    "https://unpkg.com/bootstrap-table@1.19.0/dist/extensions/filter-control/"
    "bootstrap-table-filter-control.css":
        ("bootstrap-table", "dist/extensions/filter-control/bootstrap-table-filter-control.min.css"),
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/js/"
    "bootstrap-datepicker.min.js": ("bootstrap-datepicker", "dist/js/bootstrap-datepicker.min.js"),
    "https://cdnjs.cloudflare.com/ajax/libs/bootstrap-datepicker/1.9.0/css/"
    "bootstrap-datepicker.min.css": ("bootstrap-datepicker", "dist/css/bootstrap-datepicker.min.css"),
    "https://cdn.jsdelivr.net/npm/@forevolve/bootstrap-dark@1.1.0/dist/css/"
    "bootstrap-prefers-dark.css": ("@forevolve/bootstrap-dark", "dist/css/bootstrap-prefers-dark.css"),
}
LOGO_BUCKET = "https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/"
# Subresource integrity and CORS mode make a browser refuse the same file from file://.
SRI = re.compile(r'\s+(integrity="[^"]*"|crossorigin="[^"]*")')


def vendor_dir(package: str) -> str:
    """Where a package's files live under ``static/vendor/`` (``@scope/name`` → ``name``)."""
    return package.rsplit("/", 1)[-1]


def rewrite(source: str) -> str:
    """A GX template with each remote asset pointed at its vendored copy under the site."""
    for url in sorted(REMOTE, key=len, reverse=True):   # longest first: vega-lite before vega
        package, path = REMOTE[url]
        for quote in ('"', "'"):
            source = source.replace(f"{quote}{url}{quote}",
                                    f"{quote}{{{{ site_static() }}}}vendor/"
                                    f"{vendor_dir(package)}/{path}{quote}")
    source = SRI.sub("", source)
    # The navbar logo: GX's own copy in static/images/ instead of the public bucket.
    source = source.replace(f'{{% set static_images_dir = "{LOGO_BUCKET}" -%}}',
                            '{% set static_images_dir = site_static() + "images/" -%}')
    # The dark theme's logo (a file GX does not ship): the light one stays.
    return re.sub(rf"url\('{re.escape(LOGO_BUCKET)}[^']*'\)", "none", source)


@pass_context
def site_static(context: Context) -> str:
    """The site's ``static/`` folder relative to the page being rendered. A validation
    result page is ``validations/<suite, one folder per dot-part>/<run name>/<run time>/
    <batch>.html``; a suite page ``expectations/<suite parts>.html``; the index is at the top."""
    renderer = str(context.get("renderer_type") or "")
    dots = str(context.get("expectation_suite_name") or "").count(".")
    if "ValidationResults" in renderer or "ProfilingResults" in renderer:
        return "../" * (dots + 4) + "static/"
    if "ExpectationSuite" in renderer:
        return "../" * (dots + 1) + "static/"
    return "./static/"


class OfflineLoader(BaseLoader):
    """GX's template loader, with remote assets rewritten (see ``rewrite``)."""

    def __init__(self, inner: BaseLoader) -> None:
        self.inner = inner

    def get_source(self, environment: Environment,
                   template: str) -> tuple[str, str | None, Callable[[], bool] | None]:
        source, filename, uptodate = self.inner.get_source(environment, template)
        return rewrite(source), filename, uptodate


def _offline(env: Environment) -> None:
    assert env.loader is not None
    env.loader = OfflineLoader(env.loader)
    env.globals["site_static"] = site_static


# GX builds these classes from configuration, passing what their signatures name: the
# signatures repeat the parents' instead of ``*args, **kwargs``.
class OfflinePageView(DefaultJinjaPageView):
    def __init__(self, custom_styles_directory: str | None = None,
                 custom_views_directory: str | None = None) -> None:
        super().__init__(custom_styles_directory, custom_views_directory)
        _offline(self.env)


class OfflineIndexPageView(DefaultJinjaIndexPageView):
    def __init__(self, custom_styles_directory: str | None = None,
                 custom_views_directory: str | None = None) -> None:
        super().__init__(custom_styles_directory, custom_views_directory)
        _offline(self.env)


def _view(name: str) -> dict[str, str]:
    return {"module_name": __name__, "class_name": name}


class OfflineSiteBuilder(SiteBuilder):
    """GX's site builder with the offline views and the vendored files in ``static/``."""

    def __init__(self, data_context: Any, store_backend: Any, site_name: str | None = None,
                 site_index_builder: dict[str, Any] | None = None,
                 show_how_to_buttons: bool = True,
                 site_section_builders: dict[str, Any] | None = None,
                 runtime_environment: dict[str, Any] | None = None, **kwargs: Any) -> None:
        sections = {name: {"view": _view("OfflinePageView")}
                    for name in ("expectations", "validations", "profiling")}
        for name, config in (site_section_builders or {}).items():
            sections[name] = {**sections.get(name, {}), **config} if config else config
        index = {"class_name": "DefaultSiteIndexBuilder", "view": _view("OfflineIndexPageView"),
                 **(site_index_builder or {})}
        super().__init__(data_context, store_backend, site_name=site_name,
                         site_index_builder=index, show_how_to_buttons=show_how_to_buttons,
                         site_section_builders=sections,
                         runtime_environment=runtime_environment, **kwargs)

    def build(self, resource_identifiers: Any = None, build_index: bool = True) -> Any:
        built = super().build(resource_identifiers=resource_identifiers, build_index=build_index)
        backend = self.target_store.store_backends["static_assets"]
        if not backend.has_key(("static", "vendor", "MANIFEST.json")):
            self.target_store.copy_static_assets(str(STATIC_ROOT / "static"))
        return built


# -- vendoring (a maintainer's step; the files are committed) ---------------------------------
def fetch(dest: Path = VENDOR) -> dict[str, Any]:
    """Fetch every package with ``npm pack`` and keep its listed files and licence."""
    manifest: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for package, (version, files) in PACKAGES.items():
            out = subprocess.run(["npm", "pack", "--silent", f"{package}@{version}"], cwd=tmp,
                                 check=True, capture_output=True, text=True).stdout
            target = dest / vendor_dir(package)
            shutil.rmtree(target, ignore_errors=True)
            with tarfile.open(Path(tmp) / out.strip().splitlines()[-1]) as tar:
                names = set(tar.getnames())
                licence = next((n for n in ("package/LICENSE", "package/LICENSE.txt",
                                            "package/LICENSE.md") if n in names), None)
                kept = {}
                wanted = {f"package/{p}": p for p in files}
                if licence:   # kept as .txt: a type every store backend knows
                    wanted[licence] = "LICENSE.txt"
                for member_name, path in wanted.items():
                    member = tar.extractfile(member_name)
                    assert member is not None, f"{package}@{version} has no {member_name}"
                    data = member.read()
                    (target / path).parent.mkdir(parents=True, exist_ok=True)
                    (target / path).write_bytes(data)
                    kept[path] = hashlib.sha256(data).hexdigest()
            manifest[package] = {"version": version, "folder": vendor_dir(package),
                                 "files": kept}
    (dest / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


if __name__ == "__main__":
    result = fetch()
    print(f"vendored {len(result)} packages into {VENDOR}", file=sys.stderr)
