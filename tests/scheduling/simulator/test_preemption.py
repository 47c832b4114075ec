import pytest
from sched_builders import job, node

from scheduling.policies import get_policy
from scheduling.simulator import SimConfig, SimJob, simulate


def sj(job_id, submit, duration, **kw):
    return SimJob(job(job_id, submit_time=submit, gpus=1, **kw), duration)


def run(jobs, policy="las+fifo-first-fit"):
    r = simulate([node("a", gpus=1)], jobs, get_policy(policy), SimConfig(step_s=1))
    return r, {o.job_id: o for o in r.outcomes}


def test_las_evicts_a_job_that_left_the_top_queue():
    # A has 4000 GPU-s at t=4000 (> the 3600 s threshold): queue 1; B is new: queue 0
    r, o = run([sj("A", 0, 10_000), sj("B", 4000, 100)])
    assert o["B"].start == 4000 and o["B"].finish == 4100
    assert o["A"].placements == 2 and o["A"].start == 0  # first start kept
    assert o["A"].finish == 4100 + 10_000  # restarted from scratch
    assert r.reversals == 1 and r.summary()["placement_stability"] == pytest.approx(2 / 3)  # 3 placements, 1 undone
    _, alloc = r.gpu_allocation(windows=1)
    assert alloc[0] == 1.0  # A's first run ends where B's begins: the GPU never double-counted


def test_las_does_not_evict_within_the_same_queue():
    r, o = run([sj("A", 0, 10_000), sj("B", 2000, 100)])  # A has 2000 GPU-s: still queue 0
    assert o["B"].start == 10_000 and r.reversals == 0


def test_fifo_never_preempts():
    r, o = run([sj("A", 0, 10_000), sj("B", 4000, 100)], policy="fifo-first-fit")
    assert o["B"].start == 10_000 and r.reversals == 0
