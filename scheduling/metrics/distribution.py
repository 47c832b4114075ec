"""``Distribution``: mean and the p50 / p95 / p99 of a sample, defined once.

Percentiles interpolate linearly between the closest ranks (numpy's default ``linear``
method, Excel's PERCENTILE.INC), which is ClickHouse's ``quantileExactInclusive`` — the
function the archive's SQL uses, so the simulator and the archive agree to rounding.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Distribution:
    n: int
    mean: float | None
    p50: float | None
    p95: float | None
    p99: float | None
    max: float | None

    @classmethod
    def of(cls, values: Iterable[float]) -> Distribution:
        xs = np.asarray(list(values), dtype=np.float64)
        if xs.size == 0:
            return cls(0, None, None, None, None, None)
        p50, p95, p99 = (float(v) for v in np.percentile(xs, [50, 95, 99]))
        return cls(int(xs.size), float(xs.mean()), p50, p95, p99, float(xs.max()))

    def as_dict(self, prefix: str = "") -> dict[str, float | int | None]:
        return {f"{prefix}{k}": v for k, v in asdict(self).items()}
