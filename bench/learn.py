"""learn: how right the rule learner's rules are on pages it did not learn from.

For each layout of the test corpus (``tests/support/layouts.py``: generated class names
with extra wrappers, a label table in a different row order on every page, values only
in microdata, only in JSON-LD, in data attributes — each with related products as
distractors), rules are learned from 8 example pages and applied by the cleaner's
extractor to 40 others. ``learn_fields_right`` is the share of their fields (name, price,
SKU, brand, and a listing date where the layout shows one) that come out right, typed;
``learn_seconds`` what learning from the 8 examples took, per layout.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from bench.figure import Figure, Size, sized
from stratacrawl.clean.extract import Page, RulesExtractor
from stratacrawl.clean.learn import Example, field_type, learn, same
from stratacrawl.sources import RulesExtract

FIGURES = ("learn_fields_right", "learn_seconds")
EXAMPLES = 8


def run(size: Size = "full") -> Iterator[Figure]:
    from tests.support.layouts import LAYOUTS, pages  # the corpus the tests use

    others = sized(size, smoke=2, quick=20, full=40)
    right = total = 0
    per_layout: dict[str, float] = {}
    seconds: dict[str, float] = {}
    kinds: dict[str, list[str]] = {}
    for layout in sorted(LAYOUTS):
        corpus = pages(layout, EXAMPLES + others, seed=11)
        t0 = time.perf_counter()
        learned = learn([Example(n, f"http://shop.test/{n}", h, f)
                         for n, h, f in corpus[:EXAMPLES]])
        seconds[layout] = round(time.perf_counter() - t0, 3)
        kinds[layout] = sorted({f.kind or "none" for f in learned.fields.values()})
        extractor = RulesExtractor(RulesExtract.model_validate(learned.extract_block()))
        good = count = 0
        for name, html, truth in corpus[EXAMPLES:]:
            found = extractor.extract(Page(f"http://shop.test/{name}", "text/html", html))
            got = found[0].fields if found else {}
            for field, want in truth.items():
                count += 1
                good += same(field_type([want]), got.get(field), want)
        per_layout[layout] = round(good / count, 4)
        right, total = right + good, total + count
    yield Figure("learn", "learn_fields_right", right / total, "share",
                 extra={"per_layout": per_layout, "rule_kinds": kinds, "examples": EXAMPLES,
                        "pages_checked_per_layout": others})
    yield Figure("learn", "learn_seconds", max(seconds.values()), "s",
                 extra={"per_layout": seconds})
