"""GPU allocation over time: the share of the cluster's GPU capacity (in milli-GPU) held by
placed jobs, as a time-weighted mean per bucket.

A job holds ``gpu_milli`` from the moment it starts until it ends (finished, failed,
preempted), or until ``end`` while it still runs. For each bucket ``[b, b + bucket_s)``
(the last one cut at ``end``) the allocation is ``Σ overlap(holding, bucket) × gpu_milli /
bucket length``, and the ratio divides it by the capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Holding:
    start: float  # seconds (any epoch)
    end: float | None  # None: still holding
    gpu_milli: int


@dataclass(frozen=True, slots=True)
class AllocationSample:
    bucket_start: float
    allocated_milli: float  # time-weighted mean over the bucket
    capacity_milli: int

    @property
    def ratio(self) -> float:
        return self.allocated_milli / self.capacity_milli if self.capacity_milli else 0.0


def allocation_over_time(holdings: list[Holding], capacity_milli: int, *, bucket_s: float,
                         end: float | None = None, start: float | None = None) -> list[AllocationSample]:  # fmt: skip
    """Samples from the bucket of the first start (buckets on multiples of ``bucket_s``) to ``end``
    (default: the last end); with ``start``, from ``start`` itself (buckets from there: the time
    before the first holding counts, at 0)."""
    if not holdings or bucket_s <= 0:
        return []
    first = min(h.start for h in holdings)
    ends = [h.end for h in holdings if h.end is not None]
    stop = end if end is not None else max([*ends, first])
    b0 = math.floor(first / bucket_s) * bucket_s if start is None else start
    samples = []
    # the count first, each start from b0 (found by review: adding bucket_s up left a last bucket ~1e-14 s
    # wide in half of the spans, weighted like the others in the mean and the peak)
    for k in range(max(1, math.ceil((stop - b0) / bucket_s - 1e-9))):
        b = b0 + k * bucket_s
        hi = min(b + bucket_s, stop) if stop > b else b + bucket_s
        width = hi - b
        held = 0.0
        for h in holdings:
            h_end = stop if h.end is None else h.end
            overlap = min(h_end, hi) - max(h.start, b)
            if overlap > 0:
                held += overlap * h.gpu_milli
        samples.append(AllocationSample(b, held / width if width > 0 else 0.0, capacity_milli))
    return samples


def mean_allocation(samples: list[AllocationSample], bucket_s: float, end: float) -> float | None:
    """The share of GPU capacity held over the run: the buckets' time-weighted means
    (:func:`scheduling.metrics.allocation_over_time`), each weighted by its length, ``bucket_s`` or
    less for the last one, cut at the run's ``end`` (found by review: weighted equally, a last bucket
    1 s long counted as much as a whole one)."""
    widths = [min(bucket_s, end - s.bucket_start) if end > s.bucket_start else bucket_s for s in samples]
    total = sum(widths)
    return sum(s.ratio * w for s, w in zip(samples, widths, strict=True)) / total if total > 0 else None
