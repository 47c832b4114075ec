import pytest

from scheduling.metrics import Distribution, JobOutcome, job_metrics, order_agreement, placement_stability


def test_distribution_interpolates_like_percentile_inc():
    d = Distribution.of([1, 2, 3, 4])
    assert (d.n, d.mean, d.p50, d.max) == (4, 2.5, 2.5, 4)
    assert d.p95 == pytest.approx(3.85)  # 1 + 0.95 * 3 ranks
    assert Distribution.of([]).mean is None


def test_job_metrics_on_a_known_run():
    outcomes = [
        JobOutcome("a", submit=0, state="finished", start=0, finish=10, placements=1),
        JobOutcome("b", submit=5, state="finished", start=10, finish=25, placements=2),  # re-queued once
        JobOutcome("c", submit=6, state="rejected"),
        JobOutcome("d", submit=7, state="running", start=20, placements=1),
        JobOutcome("e", submit=8, state="pending"),
    ]
    m = job_metrics(outcomes)
    assert (m.jobs, m.finished, m.rejected, m.unfinished) == (5, 2, 1, 2)
    assert m.jct.mean == pytest.approx((10 + 20) / 2)
    assert m.queueing_delay.mean == pytest.approx((0 + 5 + 13) / 3)
    assert m.makespan_s == 25
    assert m.throughput_jobs_per_s == pytest.approx(2 / 25)
    assert m.placement_rate_per_s == pytest.approx(4 / 25)


def test_job_metrics_without_finishes():
    m = job_metrics([JobOutcome("a", submit=0, state="pending")])
    assert m.makespan_s is None and m.throughput_jobs_per_s is None and m.jct.n == 0


def test_placement_stability():
    assert placement_stability(10, 1) == pytest.approx(0.9)
    assert placement_stability(0, 0) is None


def test_order_agreement():
    assert order_agreement([["a", "b", "c"], ["a", "b", "c", "d"]]) == 1.0
    assert order_agreement([["a", "b", "c"], ["c", "b", "a"]]) == 0.0
    # b, c common after a was placed; they swapped: 0 of 1 pair concordant; then a stable pair
    assert order_agreement([["a", "b", "c"], ["c", "b"], ["c", "b"]]) == pytest.approx(0.5)
    assert order_agreement([["a"], ["b"]]) is None
