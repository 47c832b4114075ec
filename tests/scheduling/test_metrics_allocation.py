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
