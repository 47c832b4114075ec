import pytest
from sched_builders import job, node

from scheduling.simulator import SimJob, offered_peak, plan_load
from scheduling.simulator.workload import scale_jobs


def sj(job_id, submit, duration, gpus=1):
    return SimJob(job(job_id, submit_time=submit, gpus=gpus), duration)


def test_offered_peak_is_the_busiest_window_of_the_arrival_span():
    nodes = [node("a", gpus=4)]
    jobs = [sj("a", 0, 10), sj("b", 5, 10), sj("c", 10, 100)]
    # windows of 5 s over [0, 10): [0,5) holds 1 GPU, [5,10) holds 2 -> 2 / 4
    assert offered_peak(nodes, jobs, windows=2) == pytest.approx(0.5)
    assert offered_peak(nodes, [sj("a", 0, 1), sj("b", 0, 1, gpus=2)]) == pytest.approx(0.75)  # all at once


def test_scaling_compresses_arrivals_and_superposes_replicas():
    jobs = [sj("a", 100, 1), sj("b", 110, 1)]
    out = scale_jobs(jobs, 2.0, copies=2)
    assert [(j.job_id, j.request.submit_time) for j in out] == [("a", 100), ("a#1", 102.5), ("b", 105), ("b#1", 107.5)]


def test_plan_load_hits_the_target_and_adds_replicas_only_when_needed():
    nodes = [node("a", gpus=10)]
    jobs = [sj(f"j{i}", i * 100.0, 50.0) for i in range(20)]  # offered 0.05 at native speed
    plan = plan_load(nodes, jobs, 0.4)
    assert plan.copies == 1 and plan.offered_peak == pytest.approx(0.4, rel=0.03)
    big = plan_load(nodes, jobs, 1.2)  # 20 one-GPU jobs never exceed 2.0; 1.2 needs compression only
    assert big.offered_peak == pytest.approx(1.2, rel=0.03)
    few = [sj("a", 0.0, 50.0), sj("b", 1.0, 50.0)]  # at most 2 of 10 GPUs: replicas needed for 0.4
    plan = plan_load(nodes, few, 0.4)
    assert plan.copies >= 2 and plan.offered_peak == pytest.approx(0.4, rel=0.03)


def test_plan_load_scores_each_scaling_as_the_scaled_jobs_to_the_last_bit():
    """plan_load scores its scalings on arrays (load._Scaled), not on scaled jobs: the same numbers,
    bit for bit, with ties on the submit time and irregular float times."""
    import numpy as np

    from scheduling.simulator.load import _capacity, _Scaled

    rng = np.random.default_rng(7)
    nodes = [node("a", gpus=8), node("b", gpus=4)]
    times = np.sort(rng.uniform(0, 1e5, 40)).round(3)
    times[5:9] = times[5]  # a tie
    jobs = [sj(f"j{i}", float(t), float(rng.uniform(1, 5e3)), gpus=1 + i % 3) for i, t in enumerate(times)]
    scaled = _Scaled(jobs, "gpu")
    cap = _capacity(nodes, "gpu")
    for factor in (1.0, 0.37, 3.0, 1234.5678, *(10 ** rng.uniform(-3, 4, 20))):
        for copies in (1, 2, 5):
            for windows in (3, 100):
                expected = offered_peak(nodes, scale_jobs(jobs, float(factor), copies), windows)
                assert scaled.peak(float(factor), copies, cap, windows) == expected, (factor, copies, windows)
    plan = plan_load(nodes, jobs, 1.2)
    assert plan.offered_peak == offered_peak(nodes, scale_jobs(jobs, plan.factor, plan.copies))
