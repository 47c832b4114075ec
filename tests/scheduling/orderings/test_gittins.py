"""The Gittins index over sampled run times, and the ``gittins`` ordering."""

from __future__ import annotations

import numpy as np
import pytest

from scheduling.job import JobRequest
from scheduling.order_context import OrderContext
from scheduling.orderings import available_orderings, get_ordering
from scheduling.orderings.gittins import gittins_index, lognormal_samples, mean_index, quantile_index
from scheduling.policies import get_policy


def _job(i: int, submit: float = 0.0, **kw: object) -> JobRequest:
    return JobRequest(job_id=f"j{i}", app=f"a{i}", cpu_milli=1000, submit_time=submit, **kw)  # type: ignore[arg-type]


class Samples:
    """A predictor answering fixed sample rows per job id."""

    def __init__(self, rows: dict[str, list[float]]) -> None:
        self.rows = rows

    def predict(self, job: JobRequest) -> float | None:
        return float(np.median(self.rows[job.job_id]))

    def predict_samples(self, jobs: list[JobRequest]) -> tuple[np.ndarray, np.ndarray]:
        s = np.array([self.rows[j.job_id] for j in jobs], dtype=np.float64)
        return s, np.ones_like(s)


def test_deterministic_size_is_srpt() -> None:
    sizes = np.array([[30.0], [5.0], [600.0]])
    assert np.allclose(gittins_index(sizes), [1 / 30, 1 / 5, 1 / 600])
    # resumable: what remains after 20 s of a 30 s job is 10 s, so it now beats the 15 s job
    assert np.allclose(gittins_index(np.array([[30.0], [15.0]]), age=np.array([20.0, 0.0]), restart=False),
                       [1 / 10, 1 / 15])  # fmt: skip
    jobs = [_job(0, 0.0), _job(1, 1.0), _job(2, 2.0)]
    est = Samples({"j0": [30.0], "j1": [5.0], "j2": [600.0]})
    assert [j.job_id for j in get_ordering("gittins").order(jobs, 3.0, OrderContext(estimator=est))] == ["j1", "j0", "j2"]


def test_sup_over_delta_favours_a_chance_of_finishing_soon() -> None:
    # {1 s, 100 s} with equal odds: serving 1 s finishes it half the time -> index 0.5; its mean
    # (50.5 s) is far worse than a sure 10 s job. Taking Δ = ∞ only (the mean) flips the order.
    s = np.array([[1.0, 100.0], [10.0, 10.0]])
    g = gittins_index(s)
    assert g[0] == pytest.approx(0.5) and g[1] == pytest.approx(0.1)
    assert mean_index(s)[0] == pytest.approx(1 / 50.5)
    # the sup is at an interior support point, not at the first or the last one
    s3 = np.array([[1.0, 2.0, 2.0, 2.0, 1000.0]])
    ratios = [0.2 / (0.2 * 1 + 0.8 * 1), 0.8 / (0.2 * 1 + 0.6 * 2 + 0.2 * 2), 1.0 / (0.2 + 1.2 + 200)]
    assert gittins_index(s3)[0] == pytest.approx(max(ratios)) == pytest.approx(4 / 9)
    assert max(ratios) == ratios[1]
    jobs = [_job(0, 0.0), _job(1, 1.0)]
    est = Samples({"j0": [10.0, 10.0], "j1": [1.0, 100.0]})
    assert [j.job_id for j in get_ordering("gittins").order(jobs, 2.0, OrderContext(estimator=est))] == ["j1", "j0"]
    assert [j.job_id for j in get_ordering("gittins", rule="mean").order(jobs, 2.0, OrderContext(estimator=est))] \
        == ["j0", "j1"]  # fmt: skip


def test_decreasing_hazard_favours_least_attained_service() -> None:
    # a Pareto-like sample set: the longer a job has run, the longer it is expected to run on
    pareto = np.sort(10.0 * (1 - (np.arange(64) + 0.5) / 64) ** (-1 / 1.2))[None, :].repeat(3, axis=0)
    ages = np.array([500.0, 0.0, 50.0])
    g = gittins_index(pareto, age=ages, restart=False)
    assert list(np.argsort(-g)) == [1, 2, 0]  # least attained first
    jobs = [_job(0, 0.0), _job(1, 1.0), _job(2, 2.0)]
    ctx = OrderContext(estimator=Samples({j.job_id: list(pareto[0]) for j in jobs}),
                       attained_service={"j0": 500.0, "j2": 50.0})  # one core: service = seconds
    assert [j.job_id for j in get_ordering("gittins", restart=False).order(jobs, 3.0, ctx)] == ["j1", "j2", "j0"]


def test_outlived_and_missing_rows() -> None:
    s = np.array([[10.0, 20.0], [np.nan, np.nan]])
    g = gittins_index(s, age=np.array([50.0, 0.0]))
    assert g[0] == pytest.approx(1 / 50) and np.isnan(g[1])
    # weights: zero weight drops a sample
    assert gittins_index(np.array([[1.0, 100.0]]), np.array([[0.0, 1.0]]))[0] == pytest.approx(1 / 100)
    assert quantile_index(np.array([[4.0, 1.0, 3.0, 2.0]]), q=0.5)[0] == pytest.approx(1 / 2)


def test_point_estimates_and_declared_runtimes() -> None:
    assert "gittins" in available_orderings()
    assert get_policy("gittins+best-fit").name == "gittins+best-fit"
    jobs = [_job(0, 0.0), _job(1, 1.0, runtime_estimate_s=5.0), _job(2, 2.0)]
    # no estimator: every undeclared job is default_s long; the declared 5 s job goes first, then FIFO
    assert [j.job_id for j in get_ordering("gittins").order(jobs, 3.0, None)] == ["j1", "j0", "j2"]
    med = lognormal_samples(np.array([100.0]), 1.0, 15)
    assert med.shape == (1, 15) and np.median(med) == pytest.approx(100.0)
    assert get_ordering("gittins").order([], 0.0, None) == []
    with pytest.raises(ValueError):
        get_ordering("gittins", rule="nope")
