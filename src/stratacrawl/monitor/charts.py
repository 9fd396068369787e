"""Server-side SVG charts for the ops page: no scripts, no fonts or styles from anywhere
else, so a page opens offline and in locked-down networks.

``charts_html`` turns ``metrics_minutes`` rows (one source or all summed) into the
charts an operator looks at first: pages per minute, success rate, p99 latency against
its mean over the window, backlog (hot and ledger), ingest against fetch, and the alert
timeline."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape

from stratacrawl.cold.metrics_history import MinuteRow

WIDTH, HEIGHT, PAD_L, PAD_B, PAD_T = 560, 150, 52, 22, 18
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
Series = dict[str, list[tuple[float, float]]]  # name -> (epoch seconds, value)
TICKS = 5          # time labels along the x axis, ends included
GAP_S = 150.0      # points further apart than this (minute rows) are not joined: a gap


def _tick_label(t: float, span: float) -> str:
    """A time axis label that tells the ticks of its window apart: the day too once the
    window spans half a day (a 24 h window's ends read the same clock time)."""
    when = datetime.fromtimestamp(t, UTC)
    return f"{when:%m-%d %H:%M}" if span >= 12 * 3600 else f"{when:%H:%M}"


def _runs(pts: list[tuple[float, float]], gap_s: float) -> list[list[tuple[float, float]]]:
    """``pts`` split where consecutive points are more than ``gap_s`` apart: minutes with
    no data are drawn as gaps, not as a straight line across them."""
    runs: list[list[tuple[float, float]]] = []
    for p in pts:
        if runs and p[0] - runs[-1][-1][0] <= gap_s:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


def _fmt(v: float) -> str:
    if abs(v) >= 1000:
        return f"{v / 1000:.1f}k"
    return f"{v:.0f}" if abs(v) >= 10 or v == int(v) else f"{v:.2f}"


def line_chart(title: str, series: Series, t0: float, t1: float, *, unit: str = "",
               y_max: float | None = None, css: str = "",
               joined: frozenset[str] = frozenset()) -> str:
    """One chart: a polyline per series over [t0, t1] (broken where minutes have no data,
    but for the series named in ``joined``), y from 0, labelled time ticks, a legend."""
    values = [v for pts in series.values() for _, v in pts]
    top = y_max if y_max is not None else max(values, default=0.0) or 1.0
    w, h = WIDTH - PAD_L - 8, HEIGHT - PAD_B - PAD_T
    span = max(t1 - t0, 1.0)

    def xy(t: float, v: float) -> str:
        return f"{PAD_L + (t - t0) / span * w:.1f},{PAD_T + h - min(v, top) / top * h:.1f}"

    parts = [f"<svg class='chart {escape(css)}' xmlns='http://www.w3.org/2000/svg' "
             f"width='{WIDTH}' height='{HEIGHT}' viewBox='0 0 {WIDTH} {HEIGHT}' role='img' "
             f"aria-label='{escape(title)}'><title>{escape(title)}</title>",
             f"<text x='{PAD_L}' y='12' font-size='12' font-weight='bold'>{escape(title)}</text>",
             f"<line x1='{PAD_L}' y1='{PAD_T + h}' x2='{PAD_L + w}' y2='{PAD_T + h}' "
             "stroke='#999'/>",
             f"<line x1='{PAD_L}' y1='{PAD_T}' x2='{PAD_L}' y2='{PAD_T + h}' stroke='#999'/>",
             f"<text x='{PAD_L - 4}' y='{PAD_T + 4}' font-size='10' text-anchor='end'>"
             f"{_fmt(top)}{escape(unit)}</text>",
             f"<text x='{PAD_L - 4}' y='{PAD_T + h}' font-size='10' text-anchor='end'>0</text>"]
    for i in range(TICKS):   # time ticks, UTC, each labelled
        t = t0 + span * i / (TICKS - 1)
        x = PAD_L + w * i / (TICKS - 1)
        anchor = "start" if i == 0 else "end" if i == TICKS - 1 else "middle"
        label = _tick_label(t, span) + (" UTC" if i == TICKS - 1 else "")
        parts.append(f"<line x1='{x:.1f}' y1='{PAD_T + h}' x2='{x:.1f}' y2='{PAD_T + h + 3}' "
                     f"stroke='#999'/><text class='tick' x='{x:.1f}' y='{HEIGHT - 6}' "
                     f"font-size='10' text-anchor='{anchor}'>{label}</text>")
    if not values:
        parts.append(f"<text x='{PAD_L + w / 2}' y='{PAD_T + h / 2}' font-size='11' "
                     "text-anchor='middle' fill='#888'>no data in this window</text>")
    for i, (name, pts) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        for run in ([pts] if name in joined else _runs(pts, GAP_S)):
            if len(run) == 1:
                cx, cy = xy(*run[0]).split(",")
                parts.append(f"<circle class='series' data-series='{escape(name)}' cx='{cx}' "
                             f"cy='{cy}' r='2' fill='{colour}'/>")
            elif run:
                points = " ".join(xy(t, v) for t, v in run)
                parts.append(f"<polyline class='series' data-series='{escape(name)}' "
                             f"fill='none' stroke='{colour}' stroke-width='1.5' "
                             f"points='{points}'/>")
        parts.append(f"<text x='{PAD_L + 8 + i * 130}' y='{PAD_T + 10}' font-size='10' "
                     f"fill='{colour}'>{escape(name)}</text>")
    parts.append("</svg>")
    return "".join(parts)


def alert_timeline(spans: Sequence[tuple[datetime, datetime | None, str, str | None, str]],
                   t0: float, t1: float, now: float) -> str:
    """Each alert as a bar from raised to resolved (or now), coloured by level; its lane
    says its level, and the bar its kind and source."""
    colour = {"P0": "#c00", "P1": "#e33", "critical": "#e33", "P2": "#e90", "warning": "#e90"}
    row_h, w = 14, WIDTH - PAD_L - 8
    height = PAD_T + max(len(spans), 1) * row_h + PAD_B
    span = max(t1 - t0, 1.0)
    parts = [f"<svg class='chart alerts' xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' "
             f"height='{height}' viewBox='0 0 {WIDTH} {height}' role='img' "
             "aria-label='alert timeline'><title>alert timeline</title>"
             "<text x='52' y='12' font-size='12' font-weight='bold'>alerts</text>"]
    if not spans:
        parts.append(f"<text x='{PAD_L}' y='{PAD_T + 10}' font-size='11' fill='#888'>"
                     "no alert in this window</text>")
    for i, (raised, resolved, level, source, kind) in enumerate(spans):
        a = max(raised.timestamp(), t0)
        b = min(resolved.timestamp() if resolved else now, t1)
        x = PAD_L + (a - t0) / span * w
        bw = max((b - a) / span * w, 2.0)
        y = PAD_T + i * row_h
        label = f"{level} {kind} {source or ''}"
        parts.append(f"<rect class='alert' x='{x:.1f}' y='{y}' width='{bw:.1f}' "
                     f"height='{row_h - 3}' fill='{colour.get(level, '#888')}'>"
                     f"<title>{escape(label)}</title></rect>"
                     f"<text x='{PAD_L - 4}' y='{y + 9}' font-size='9' text-anchor='end'>"
                     f"{escape(level)}</text>"
                     f"<text class='alert-kind' x='{min(x + 3, WIDTH - 120):.1f}' y='{y + 9}' "
                     f"font-size='9'>{escape(label.split(' ', 1)[1].strip())}</text>")
    parts.append("</svg>")
    return "".join(parts)


def _sum_by_minute(rows: Sequence[MinuteRow]) -> list[tuple[float, dict[str, float]]]:
    """Rows of several sources summed per minute (p99: the worst source's)."""
    by: dict[float, dict[str, float]] = defaultdict(dict)
    for r in rows:
        d = by[r.minute.timestamp()]
        for name in ("requests", "ok", "failed", "retries", "latency_ms_sum", "hot_backlog",
                     "ledger_backlog", "staged_per_min"):
            v = getattr(r, name)
            if v is not None:
                d[name] = d.get(name, 0.0) + v
        if r.p99_ms is not None:
            d["p99_ms"] = max(d.get("p99_ms", 0.0), r.p99_ms)
    return sorted(by.items())


def charts_html(rows: Sequence[MinuteRow], spans: Sequence[tuple[datetime, datetime | None,
                                                                  str, str | None, str]],
                t0: float, t1: float, now: float) -> str:
    minutes = _sum_by_minute(rows)

    def pts(key: str) -> list[tuple[float, float]]:
        return [(t, d[key]) for t, d in minutes if key in d]

    success = [(t, d["ok"] / d["requests"] * 100) for t, d in minutes if d.get("requests")]
    total_lat = sum(d.get("latency_ms_sum", 0.0) for _, d in minutes)
    total_req = sum(d.get("requests", 0.0) for _, d in minutes)
    mean = total_lat / total_req if total_req else None
    p99 = pts("p99_ms")
    latency: Series = {"p99 ms": p99}
    mean_name = f"mean over window {mean:.0f} ms" if mean is not None else ""
    if mean is not None and p99:
        latency[mean_name] = [(p99[0][0], mean), (p99[-1][0], mean)]
    return "".join([
        line_chart("pages per minute", {"requests": pts("requests"), "failed": pts("failed")},
                   t0, t1, css="pages"),
        line_chart("success rate", {"success %": success}, t0, t1, unit="%", y_max=100,
                   css="success"),
        line_chart("latency", latency, t0, t1, unit=" ms", css="latency",
                   joined=frozenset({mean_name})),
        line_chart("backlog", {"ledger": pts("ledger_backlog"), "hot": pts("hot_backlog")},
                   t0, t1, css="backlog"),
        line_chart("ingest vs fetch (per minute)", {"fetched ok": pts("ok"),
                                                     "staged": pts("staged_per_min")},
                   t0, t1, css="ingest"),
        alert_timeline(spans, t0, t1, now),
    ])
