from datetime import UTC, datetime, timedelta

import pytest

from stratacrawl.sim import build_specs
from stratacrawl.sim.content import get_item, published_at, truth, visible_count
from stratacrawl.sim.render import item_html

pytestmark = pytest.mark.unit
EPOCH = datetime(2026, 11, 30, 4, 0, tzinfo=UTC)


def test_same_seed_same_items_other_seed_other_items() -> None:
    a, b, c = (build_specs(3, s, epoch=EPOCH, ports=[1, 2, 3]) for s in (7, 7, 8))
    assert [get_item(s, 5).fields for s in a] == [get_item(s, 5).fields for s in b]
    assert [get_item(s, 5).fields for s in a] != [get_item(s, 5).fields for s in c]
    assert item_html(a[0], 5, False) == item_html(b[0], 5, False)


def test_items_appear_over_time_at_the_source_rate() -> None:
    spec = build_specs(1, 7, epoch=EPOCH, ports=[1])[0]
    at_epoch = visible_count(spec, EPOCH)
    assert at_epoch == spec.backlog
    later = EPOCH + timedelta(seconds=spec.publish_every_s * 5 + 1)
    assert visible_count(spec, later) == spec.backlog + 5
    # The backlog is spread over the day before the epoch.
    assert visible_count(spec, EPOCH - timedelta(hours=12)) == pytest.approx(spec.backlog / 2, abs=2)
    assert visible_count(spec, EPOCH - timedelta(days=2)) == 0
    assert all(published_at(spec, k) <= later for k in range(spec.backlog + 5))


def test_stopped_source_publishes_nothing_new() -> None:
    spec = build_specs(1, 7, epoch=EPOCH, ports=[1])[0]
    spec.stopped_at = EPOCH + timedelta(seconds=spec.publish_every_s * 2)
    assert visible_count(spec, EPOCH + timedelta(days=1)) == spec.backlog + 2


def test_truth_lists_every_published_item_with_fields() -> None:
    news, products, prices = build_specs(3, 7, epoch=EPOCH, ports=[1, 2, 3])
    items = truth(news, EPOCH)
    assert len(items) == news.backlog
    assert {"url", "title", "author", "text", "published"} <= set(items[0])
    assert items[3]["url"] == f"{news.base_url}/article/3"
    p = truth(products, EPOCH)[0]
    assert p["price"] > 0 and p["currency"] == products.currency and isinstance(p["stock"], int)
    q = truth(prices, EPOCH)[0]
    assert {"symbol", "price", "currency", "updated"} <= set(q)


def test_page_sizes_have_a_long_tail() -> None:
    spec = build_specs(1, 7, epoch=EPOCH, ports=[1])[0]
    spec.behaviour.oversized_rate = 0.02
    sizes = sorted(get_item(spec, k).size_hint for k in range(1000))
    median = sizes[500]
    assert 20_000 < median < 45_000
    assert sizes[-1] >= 1_000_000  # some 1-5 MB pages
    for k in (7, 8, 9):  # pages are padded up to their target size
        target = get_item(spec, k).size_hint
        assert target <= len(item_html(spec, k, False)) < target + 2_000
