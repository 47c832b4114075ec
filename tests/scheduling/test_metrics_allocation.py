from __future__ import annotations

import pytest

from scheduling.metrics import Holding, allocation_over_time


def test_time_weighted_per_bucket_and_open_holdings_run_to_the_end() -> None:
    hs = [Holding(5, 65, 1000), Holding(8, None, 1000)]
    s = allocation_over_time(hs, 4000, bucket_s=60, end=65)
    assert [x.bucket_start for x in s] == [0, 60]
    assert s[0].allocated_milli == pytest.approx((55 + 52) * 1000 / 60)
    assert s[1].allocated_milli == pytest.approx(2000)  # both held through the 5 s tail
    assert s[1].ratio == pytest.approx(0.5)


def test_nothing_held_means_no_samples_and_full_hold_is_one() -> None:
    assert allocation_over_time([], 1000, bucket_s=10) == []
    s = allocation_over_time([Holding(0, 30, 1000)], 1000, bucket_s=10)
    assert [x.ratio for x in s] == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("span", [0.3, 3.0, 33.0, 95_040.0, 12_345.6])
def test_a_span_split_in_n_windows_has_n_windows_whatever_the_float_sums(span: float) -> None:
    """(Found by review: ``b += bucket_s`` left a 101st window ~1e-14 s wide in about half of the spans,
    whose "mean" was the allocation at one instant, weighted like a whole window: the peak read 100 %
    for a span 1 % allocated.)"""
    holding = [Holding(span - span / 10_000, span + 5, 1000)]
    samples = allocation_over_time(holding, 1000, bucket_s=span / 100, end=span, start=0.0)
    assert len(samples) == 100 and max(s.ratio for s in samples) == pytest.approx(0.01)
