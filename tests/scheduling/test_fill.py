"""The fill benchmark's method on hand-made cases whose answers are known."""

from __future__ import annotations

import numpy as np
import pytest

from scheduling.fill import FillRun, fill_sequence, gpu_demand, run_fill
from scheduling.job import JobRequest
from scheduling.node import NodeView
from scheduling.policies import get_policy


def pod(i: int, gpus: int = 1, milli: int = 1000) -> JobRequest:
    return JobRequest(job_id=f"p{i:03d}", cpu_milli=100, memory_mib=100, num_gpu=gpus, per_gpu_milli=milli)


def test_sequence_is_the_shuffled_originals_then_clones_up_to_the_target() -> None:
    pods = [pod(i) for i in range(10)]  # 10 GPUs of demand
    seq = fill_sequence(pods, capacity_milli=10_000, seed=7, target=1.3)
    assert sorted(p.job_id for p in seq[:10]) == [p.job_id for p in pods]  # every original, once, first
    assert all("-clone-" in p.job_id for p in seq[10:])
    total = sum(map(gpu_demand, seq))
    assert total <= 13_000 and total + 1000 > 13_000  # stopped at the first draw that would overshoot
    assert [p.job_id for p in fill_sequence(pods, 10_000, seed=7)] == [p.job_id for p in seq]  # seeded
    assert [p.job_id for p in fill_sequence(pods, 10_000, seed=8)] != [p.job_id for p in seq]


def test_run_counts_arrivals_including_drops_and_what_is_held() -> None:
    nodes = [NodeView(node_id="n1", cpu_milli=64000, memory_mib=65536, num_gpu=2, gpu_model="T4")]
    seq = [pod(1, milli=600), pod(2, milli=600), pod(3, milli=600), pod(4, gpus=2)]
    r = run_fill(nodes, seq, get_policy("best-fit"), seed=1)
    # two 600-milli pods fit (one per GPU), the third fits nowhere, then 2 whole GPUs do not either
    assert list(r.arrived) == [600, 1200, 1800, 3800]
    assert list(r.allocated) == [600, 1200, 1200, 1200]
    assert (r.placed, r.dropped) == (2, 2)


def test_value_at_x_is_the_mean_over_events_rounding_to_x_with_a_fallback() -> None:
    r = FillRun("p", 0, 1000, arrived=np.array([500, 995, 1004, 1200]), allocated=np.array([500, 900, 950, 950]),
                placed=4, dropped=0)  # fmt: skip
    assert r.allocated_at(100) == 92.5  # 99.5 and 100.4 both round to 100
    assert r.allocated_at(51) == 50.0  # none at 51: falls back to 50
    assert r.allocated_at(75) == pytest.approx(50 + 25 / 49.5 * 40)  # none near: between 50 % and 99.5 %
    assert np.isnan(r.allocated_at(130)) and np.isnan(r.allocated_at(40))  # outside the run
