"""One measured figure as ``stratacrawl bench NAME --json`` prints it: the value, its
baseline from the same run, their ratio."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

# How big a benchmark runs: "full" for the figures in docs/benchmarks.md, "quick" for a
# look (`--quick`), "smoke" for CI (`--smoke`: seconds, every figure emitted, its value
# meaningless) — so a change that breaks a benchmark fails a test.
Size = Literal["smoke", "quick", "full"]
T = TypeVar("T")


def sized(size: Size, *, smoke: T, quick: T, full: T) -> T:
    """The value of ``size``."""
    return {"smoke": smoke, "quick": quick, "full": full}[size]


@dataclass
class Figure:
    bench: str
    metric: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_name: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.baseline in (None, 0):
            return None
        return round(self.value / self.baseline, 3)  # type: ignore[operator]

    def as_dict(self) -> dict[str, Any]:
        return {"bench": self.bench, "metric": self.metric, "value": round(self.value, 3),
                "unit": self.unit,
                "baseline": None if self.baseline is None else round(self.baseline, 3),
                "baseline_name": self.baseline_name, "ratio": self.ratio, **self.extra}

    def describe(self) -> str:
        base = (f"  (baseline {self.baseline:,.1f} {self.unit}: {self.baseline_name}; "
                f"ratio {self.ratio})") if self.baseline is not None else ""
        return f"{self.bench:<10} {self.metric:<32} {self.value:>14,.2f} {self.unit}{base}"
