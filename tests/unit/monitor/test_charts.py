"""The ops page's charts: SVG drawn from the per-minute history, nothing fetched."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from stratacrawl.cold.metrics_history import MinuteRow
from stratacrawl.monitor.charts import HEIGHT, PAD_B, PAD_T, charts_html, line_chart

pytestmark = pytest.mark.unit
T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def _points(svg: str, series: str) -> list[tuple[float, float]]:
    m = re.search(rf"data-series='{re.escape(series)}'[^>]*points='([^']*)'", svg)
    assert m, f"no polyline {series}"
    return [tuple(map(float, p.split(","))) for p in m.group(1).split()]  # type: ignore[misc]


def test_a_line_chart_scales_its_points_into_the_plot() -> None:
    t0 = T0.timestamp()
    svg = line_chart("pages", {"requests": [(t0, 0), (t0 + 60, 50), (t0 + 120, 100)]},
                     t0, t0 + 120)
    pts = _points(svg, "requests")
    assert len(pts) == 3
    assert pts[0][1] == HEIGHT - PAD_B and pts[2][1] == PAD_T  # 0 at the axis, max at the top
    assert pts[0][0] < pts[1][0] < pts[2][0]
    assert "http" not in svg.replace("http://www.w3.org/2000/svg", "")  # nothing fetched
    assert "no data" in line_chart("pages", {"requests": []}, t0, t0 + 60)


def test_charts_sum_sources_per_minute_and_draw_the_alert_timeline() -> None:
    rows = [MinuteRow(sid, T0 + timedelta(minutes=m), requests=10 * (m + 1), ok=10 * (m + 1),
                      failed=0, retries=0, latency_ms_sum=100.0 * (m + 1), p99_ms=250.0,
                      ledger_backlog=5, staged_per_min=9.0)
            for m in range(3) for sid in ("a", "b")]
    spans = [(T0 + timedelta(minutes=1), None, "P1", "a", "success_rate")]
    now = (T0 + timedelta(minutes=3)).timestamp()
    html = charts_html(rows, spans, T0.timestamp(), now, now)
    for css in ("pages", "success", "latency", "backlog", "ingest", "alerts"):
        assert f"class='chart {css}'" in html
    pages = html.split("class='chart success'")[0]
    assert len(_points(pages, "requests")) == 3  # one point a minute, both sources summed
    assert "mean over window 10 ms" in html
    assert html.count("class='alert'") == 1 and "P1 success_rate a" in html
    # the lane reads by kind, not "P1 P1 P2": the bar carries its kind and source
    assert "class='alert-kind'" in html and ">success_rate a</text>" in html


def test_time_ticks_are_distinct_and_gaps_stay_gaps() -> None:
    """A 24 h window read "12:53 UTC … 12:53 UTC", and a line was drawn straight across
    the minutes with no data."""
    t0 = T0.timestamp()
    day = line_chart("pages", {"requests": [(t0, 1)]}, t0, t0 + 86_400)
    ticks = re.findall(r"class='tick'[^>]*>([^<]+)<", day)
    assert len(ticks) == 5 and len(set(ticks)) == 5, ticks
    assert ticks[0] == "12-01 10:00" and ticks[-1] == "12-02 10:00 UTC"
    hour = line_chart("pages", {"requests": [(t0, 1)]}, t0, t0 + 3600)
    assert re.findall(r"class='tick'[^>]*>([^<]+)<", hour)[1] == "10:15"
    gapped = line_chart("pages", {"requests": [(t0, 1), (t0 + 60, 2), (t0 + 600, 3),
                                               (t0 + 660, 4), (t0 + 1200, 5)]}, t0, t0 + 1200)
    assert gapped.count("<polyline") == 2 and gapped.count("<circle") == 1
