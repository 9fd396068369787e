"""The read-only ops page and the Prometheus endpoint, one small aiohttp app.

``/`` sources with status, success rate, backlog, last success, open alerts, the last
validation with its Data Docs link, and charts of the whole crawl over the last hours
(``?hours=1|6|24|72``); ``/source/<id>`` the same charts for that source, its validation
strip (last 14 days) and its last 100 requests; ``/metrics`` the seven families. Pages
and charts (SVG) are rendered on the server: they open anywhere, offline included; a
few lines of inline script refresh the charts every minute without reloading the page.
Optionally evaluates the alert rules periodically.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from html import escape
from pathlib import Path

from aiohttp import web
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from psycopg_pool import AsyncConnectionPool

from stratacrawl.cold.alerts import Alert, open_alerts
from stratacrawl.cold.metrics_history import alert_spans, read_minutes, validation_strip
from stratacrawl.cold.validation_results import latest_per_source
from stratacrawl.docs_links import served_at
from stratacrawl.hot import live
from stratacrawl.hot.client import HotRedis
from stratacrawl.hot.pacing import Pacing
from stratacrawl.monitor.charts import charts_html
from stratacrawl.monitor.evaluate import evaluate
from stratacrawl.monitor.families import SourceMetrics, collect
from stratacrawl.monitor.files import ConfinedFiles
from stratacrawl.monitor.history import roll_up
from stratacrawl.monitor.prom import registry
from stratacrawl.monitor.rules import findings
from stratacrawl.sources import AlertThresholds, SourcesFile

log = logging.getLogger(__name__)
STYLE = ("body{font-family:system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:"
         "collapse}td,th{border-bottom:1px solid #ddd;padding:4px 10px;text-align:left}"
         ".ok{color:#080}.warn{color:#b60}.bad{color:#c00}.idle{color:#888}"
         "#charts{display:flex;flex-wrap:wrap;gap:8px}.strip span{display:inline-block;"
         "width:18px;height:18px;margin:1px}.strip .pass{background:#3a3}"
         ".strip .day{display:inline-flex;flex-direction:column;align-items:center;"
         "margin-right:6px;text-decoration:none;color:#444}"
         ".strip .fail{background:#d33}")
WINDOWS_H = (1, 6, 24, 72)
DEFAULT_WINDOW_H = 24   # the most the default window grows to
DOCS_PATH = "/docs/"   # where the ops server serves the Data Docs folder
# Swaps in the charts of a fresh copy of this page every minute (no reload, no libraries).
REFRESH = ("<script>setInterval(async()=>{try{const r=await fetch(location.href);"
           "const d=new DOMParser().parseFromString(await r.text(),'text/html');"
           "document.getElementById('charts').replaceWith(d.getElementById('charts'));}"
           "catch(e){}},60000)</script>")


def _age(epoch: float | None, now: float) -> str:
    if epoch is None:
        return "never"
    s = now - epoch
    return f"{s:.0f} s ago" if s < 120 else f"{s / 60:.0f} min ago" if s < 7200 else \
        f"{s / 3600:.1f} h ago"


def _rate(configured: float, effective: float, held_s: float) -> str:
    if held_s > 0:
        return f"held {held_s:.0f} s (Retry-After) · {effective:.3g} of {configured:.3g}"
    if effective < configured:
        return f"<span class='warn'>{effective:.3g}</span> of {configured:.3g} (429s)"
    return f"{configured:.3g}"


def status(m: SourceMetrics, alerts: list[Alert], now: float,
           thresholds: AlertThresholds | None = None) -> tuple[str, str]:
    """A source's status by the alert rules themselves: its fired alerts, and the
    conditions that hold now but have not been held long enough to fire ("failing",
    "degraded" with "(alert pending)"). A source at 0 % success is never "ok" while its
    alert waits out its hold, nor while it has made too few requests for the rule to
    judge ("failing?")."""
    t = thresholds or AlertThresholds()
    now_found = findings(m, t, now)
    if any(a.kind == "not_fetching" for a in alerts):
        return "stalled", "bad"
    if any(f.rule == "not_fetching" for f in now_found):
        return "stalled (alert pending)", "bad"
    if any(a.level in ("P0", "P1") or a.severity == "critical" for a in alerts):
        return "alerting", "bad"
    if any(f.level in ("P0", "P1") for f in now_found):
        return "failing (alert pending)", "bad"
    if alerts:
        return "degraded", "warn"
    if any(f.level == "P2" for f in now_found):
        return "degraded (alert pending)", "warn"
    if m.window.requests == 0:
        return "idle", "idle"
    rate = m.window.success_rate
    if rate is not None and rate < t.success_alert:
        # Below the alert's line, on fewer requests than the rule judges: not "ok".
        return f"failing? ({m.window.requests} of {t.min_requests} requests to judge)", "warn"
    return "ok", "ok"


def _page(title: str, body: str) -> web.Response:
    html = (f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{escape(title)}</h1>{body}"
            f"<p><small>rendered {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC</small></p></body></html>")
    return web.Response(text=html, content_type="text/html")


class OpsApp:
    """The ops server; with ``docs_dir`` it also serves the Data Docs under ``/docs/``, and
    its pages link validation results there."""

    def __init__(self, redis: HotRedis, pool: AsyncConnectionPool, sources: SourcesFile, *,
                 evaluate_every_s: float | None = None, hold_s: float = 180.0,
                 docs_dir: Path | None = None) -> None:
        self.redis = redis
        self.pacing = Pacing(redis=redis)   # the sources' effective rates, read each look
        self.pool = pool
        self.sources = sources
        self.evaluate_every_s = evaluate_every_s
        self.hold_s = hold_s
        self.docs_dir = docs_dir
        self.registry, self.collector = registry()
        self._rolled_at = 0.0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/", self.index)
        app.router.add_get("/source/{source_id}", self.source)
        app.router.add_get("/metrics", self.metrics)
        if self.docs_dir is not None:
            self.docs_dir.mkdir(parents=True, exist_ok=True)
            app.router.add_get("/docs", self._docs_index)
            app.router.add_get("/docs/", self._docs_index)
            app.router.add_get("/docs/{path:.+}", ConfinedFiles(self.docs_dir).handle)
        app.cleanup_ctx.append(self._evaluator)
        return app

    async def _docs_index(self, _: web.Request) -> web.Response:
        raise web.HTTPFound("/docs/index.html")

    def _docs(self, url: str | None) -> str | None:
        """A stored Data Docs link as this server serves it (``/docs/…``)."""
        return served_at(url, self.docs_dir, DOCS_PATH) if self.docs_dir else url

    async def _evaluator(self, _: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(self._evaluate_loop()) if self.evaluate_every_s else None
        yield
        if task:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _evaluate_loop(self) -> None:
        assert self.evaluate_every_s
        while True:
            try:
                await evaluate(self.redis, self.pool, self.sources, hold_s=self.hold_s)
            except Exception as e:  # a tier hiccup: the next round tries again
                log.warning("monitor: evaluation failed: %s", e)
            await asyncio.sleep(self.evaluate_every_s)

    async def metrics(self, _: web.Request) -> web.Response:
        self.collector.snapshot = await collect(self.redis, self.pool, self.sources.ids)
        self.collector.rates = await self._rates()
        return web.Response(body=generate_latest(self.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _rates(self) -> dict[str, tuple[float, float, float]]:
        """Per source: configured rate, effective rate (429s lower it), seconds held."""
        configured = {s.id: s.rate for s in self.sources.sources}
        throttled = await self.pacing.effective_rates(configured)
        return {sid: (rate, *throttled.get(sid, (rate, 0.0))) for sid, rate in configured.items()}

    async def _validations(self) -> dict[str, tuple[bool, str, str | None]]:
        return await latest_per_source(self.pool)

    async def _charts(self, request: web.Request, source_id: str | None, now: float) -> str:
        """The charts block of a page, over ``?hours=`` with the window links; by default
        the smallest window (up to 24 h) that holds all the data there is, so a platform's
        first hour is not a sliver at the edge of a day. The last minutes of hot's
        counters are rolled up first (all that hot still holds, two hours, every ten
        minutes), so the charts are current without an evaluator."""
        try:
            asked = float(request.query["hours"]) if "hours" in request.query else None
        except ValueError:
            raise web.HTTPBadRequest(text="hours: expected a number") from None
        if asked is not None and not 0 < asked <= 24 * 7:
            raise web.HTTPBadRequest(text="hours: between 0 and 168")
        full = now - self._rolled_at > 600
        await roll_up(self.pool, self.redis, self.sources.ids,
                      minutes=120 if full else 2, now=now)
        if full:
            self._rolled_at = now
        hours = asked or DEFAULT_WINDOW_H
        since = datetime.fromtimestamp(now - hours * 3600, UTC)
        rows = await read_minutes(self.pool, since, source_id)
        if asked is None and rows:   # the smallest window that holds the oldest minute
            age_h = (now - min(r.minute for r in rows).timestamp()) / 3600
            hours = next((h for h in WINDOWS_H if h >= age_h), DEFAULT_WINDOW_H)
            hours = min(hours, DEFAULT_WINDOW_H)
            since = datetime.fromtimestamp(now - hours * 3600, UTC)
            rows = [r for r in rows if r.minute >= since]
        spans = await alert_spans(self.pool, since, source_id)
        links = " · ".join(f"<b>{h} h</b>" if h == hours else f"<a href='?hours={h}'>{h} h</a>"
                           for h in WINDOWS_H)
        return (f"<p class='window'>window: {links}</p><div id='charts'>"
                f"{charts_html(rows, spans, now - hours * 3600, now, now)}</div>{REFRESH}")

    async def index(self, request: web.Request) -> web.Response:
        now = time.time()
        metrics = await collect(self.redis, self.pool, self.sources.ids)
        alerts = await open_alerts(self.pool)
        checks = await self._validations()
        rates = await self._rates()
        rows = []
        for sid in self.sources.ids:
            m, mine = metrics[sid], [a for a in alerts if a.source_id == sid]
            label, css = status(m, mine, now, self.sources.get(sid).alerts)
            rate = m.window.success_rate
            check = checks.get(sid)
            docs = self._docs(check[2]) if check else None
            check_html = "-" if check is None else (
                f"{'pass' if check[0] else 'FAIL'} ({check[1]})"
                + (f" <a href='{escape(docs)}'>Data Docs</a>" if docs else ""))
            rows.append(
                f"<tr data-source='{escape(sid)}'><td><a href='/source/{escape(sid)}'>{escape(sid)}"
                f"</a></td><td class='status {css}'>{label}</td>"
                f"<td class='success'>{'-' if rate is None else f'{rate:.1%}'}</td>"
                f"<td class='requests'>{m.window.requests}</td>"
                f"<td class='rate'>{_rate(*rates[sid])}</td>"
                f"<td class='backlog'>{m.ledger_backlog}</td><td class='hot'>{m.hot_backlog}</td>"
                f"<td class='last-success'>{_age(m.last_success_at, now)}</td>"
                f"<td class='alerts'>{len(mine)}</td><td class='validation'>{check_html}</td></tr>")
        alert_rows = "".join(
            f"<li class='{'bad' if a.severity == 'critical' else 'warn'}'>{a.level or a.severity} "
            f"{escape(a.kind)} {escape(a.source_id or '')}: {escape(a.message)} "
            f"<small>{a.raised_at:%H:%M:%S}</small></li>" for a in alerts)
        body = (f"<h2>Whole crawl</h2>{await self._charts(request, None, now)}"
                "<h2>Sources</h2><table><tr><th>source</th><th>status</th><th>success (5 min)</th>"
                "<th>requests (5 min)</th><th>rate /s (effective of configured)</th>"
                "<th>backlog</th><th>hot window</th><th>last success</th>"
                "<th>open alerts</th><th>last validation</th></tr>" + "".join(rows) + "</table>"
                f"<h2>Open alerts ({len(alerts)})</h2><ul>{alert_rows or '<li>none</li>'}</ul>")
        return _page("Stratacrawl ops", body)

    async def source(self, request: web.Request) -> web.Response:
        sid = request.match_info["source_id"]
        if not self.sources.has(sid):
            raise web.HTTPNotFound(text=f"no source {sid!r}")
        trace = await live.trace(self.redis, sid)
        rows = "".join(
            f"<tr class='{'bad' if t.get('error') else ''}'><td>{escape(str(t['at']))}</td>"
            f"<td>{escape(str(t['url']))}</td><td>{t.get('status') or ''}</td><td>{t['ms']}</td>"
            f"<td>{t['bytes']}</td><td>{escape(str(t.get('error') or ''))}</td>"
            f"<td>{escape(str(t.get('worker') or ''))}</td></tr>" for t in trace)
        strip = "".join(   # a labelled day each: its date, pass or FAIL, its Data Docs
            f"<a class='day' href='{escape(self._docs(docs) or '#')}' title='{day}: "
            f"{'pass' if ok else 'FAIL'}'><span class='{'pass' if ok else 'fail'}'></span>"
            f"<small>{str(day)[5:]} {'pass' if ok else 'FAIL'}</small></a>"
            for day, ok, docs in await validation_strip(self.pool, sid))
        body = (f"<p><a href='/'>all sources</a></p>{await self._charts(request, sid, time.time())}"
                f"<h2>Validation, last 14 days</h2><p class='strip'>"
                f"{strip or 'no validation yet'}</p>"
                f"<h2>Last {len(trace)} requests</h2><table>"
                "<tr><th>time</th><th>URL</th><th>status</th><th>ms</th><th>bytes</th><th>error</th>"
                f"<th>worker</th></tr>{rows}</table>")
        return _page(f"Source {sid}", body)


async def serve(redis: HotRedis, pool: AsyncConnectionPool, sources: SourcesFile, *, host: str = "127.0.0.1",
                port: int = 8090, evaluate_every_s: float | None = None, hold_s: float = 180.0,
                stop: asyncio.Event | None = None, docs_dir: Path | None = None) -> None:
    """Serve until ``stop`` is set (or forever); ``docs_dir``: Data Docs under ``/docs/``."""
    runner = web.AppRunner(OpsApp(redis, pool, sources, evaluate_every_s=evaluate_every_s,
                                  hold_s=hold_s, docs_dir=docs_dir).app())
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    try:
        await (stop or asyncio.Event()).wait()
    finally:
        await runner.cleanup()
