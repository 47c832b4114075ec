import pytest
from sched_builders import job

from scheduling.order_context import OrderContext, service_rate
from scheduling.orderings import get_ordering


def ids(jobs):
    return [j.job_id for j in jobs]


def gpu_job(job_id, submit, gpus=1, share=0, **kw):
    return job(job_id, gpus=gpus, share=share, submit_time=submit, **kw)


def test_demoted_job_waits_behind_later_fresh_jobs():
    las = get_ordering("las", thresholds=(100.0,), promote_knob=None)
    jobs = [gpu_job("old", 0.0), gpu_job("new", 5.0)]
    ctx = OrderContext(attained_service={"old": 150.0})
    assert ids(las.order(jobs, 10.0, ctx)) == ["new", "old"]
    # below the threshold it is still in queue 0: plain FIFO
    assert ids(las.order(jobs, 10.0, OrderContext(attained_service={"old": 99.0}))) == ["old", "new"]


def test_k_queues_by_thresholds_fifo_inside_each():
    las = get_ordering("las", thresholds=(100.0, 1000.0), promote_knob=None)
    jobs = [gpu_job("q2", 0.0), gpu_job("q1a", 1.0), gpu_job("q0", 9.0), gpu_job("q1b", 2.0)]
    ctx = OrderContext(attained_service={"q2": 1000.0, "q1a": 100.0, "q1b": 999.0})
    assert ids(las.order(jobs, 10.0, ctx)) == ["q0", "q1a", "q1b", "q2"]


def test_starvation_guard_promotes_after_knob_times_executed_time():
    las = get_ordering("las", thresholds=(100.0,), promote_knob=2.0)
    jobs = [gpu_job("starved", 0.0), gpu_job("fresh", 50.0)]
    # 1 GPU, 150 GPU-s attained → executed 150 s; re-queued at t=1000 → promoted from t=1300
    ctx = OrderContext(attained_service={"starved": 150.0}, queued_since={"starved": 1000.0})
    assert ids(las.order(jobs, 1299.0, ctx)) == ["fresh", "starved"]
    assert ids(las.order(jobs, 1300.0, ctx)) == ["starved", "fresh"]  # queue 0, and earlier in FIFO


def test_executed_time_uses_the_service_rate():
    las = get_ordering("las", thresholds=(100.0,), promote_knob=1.0)
    half = gpu_job("half", 0.0, share=500)  # 0.5 GPU: 150 GPU-s = 300 s executed
    cpu = job("cpu", cpu=4000, submit_time=0.5)  # 4 cores: 400 core-s = 100 s executed
    fresh = gpu_job("fresh", 1.0)
    assert service_rate(half) == 0.5 and service_rate(cpu) == 4.0
    ctx = OrderContext(attained_service={"half": 150.0, "cpu": 400.0}, queued_since={"half": 0.0, "cpu": 0.0})
    assert ids(las.order([half, cpu, fresh], 150.0, ctx)) == ["cpu", "fresh", "half"]  # cpu promoted, half not
    assert ids(las.order([half, cpu, fresh], 300.0, ctx)) == ["half", "cpu", "fresh"]  # both promoted


def test_wait_defaults_to_submit_time_and_guard_can_be_disabled():
    jobs = [gpu_job("ran", 0.0), gpu_job("fresh", 1.0)]
    ctx = OrderContext(attained_service={"ran": 200.0})
    assert ids(get_ordering("las", thresholds=(100.0,), promote_knob=8.0).order(jobs, 1600.0, ctx)) == ["ran", "fresh"]
    assert ids(get_ordering("las", thresholds=(100.0,), promote_knob=8.0).order(jobs, 1599.0, ctx)) == ["fresh", "ran"]
    assert ids(get_ordering("las", thresholds=(100.0,), promote_knob=None).order(jobs, 1e9, ctx)) == ["fresh", "ran"]


def test_without_context_las_is_fifo():
    jobs = [gpu_job("b", 2.0), gpu_job("a", 1.0)]
    assert ids(get_ordering("las").order(jobs, 0.0)) == ["a", "b"]


def test_gang_attained_service_is_summed():
    las = get_ordering("las", thresholds=(100.0,), promote_knob=None)
    m1 = gpu_job("g-1", 0.0, gang_id="g", gang_size=2)
    m2 = gpu_job("g-2", 0.0, gang_id="g", gang_size=2)
    solo = gpu_job("solo", 5.0)
    ctx = OrderContext(attained_service={"g-1": 60.0, "g-2": 60.0, "solo": 90.0})
    assert ids(las.order([m2, solo, m1], 10.0, ctx)) == ["solo", "g-1", "g-2"]


@pytest.mark.parametrize("kw", [{"thresholds": (100.0, 50.0)}, {"thresholds": (0.0,)}, {"promote_knob": -1.0}])
def test_invalid_knobs(kw):
    with pytest.raises(ValueError):
        get_ordering("las", **kw)


@pytest.mark.parametrize("knob", [8.0, 1.0, None])
def test_queues_of_ranks_single_jobs_like_queue_of(knob):
    import numpy as np

    las = get_ordering("las", thresholds=(100.0, 3600.0), promote_knob=knob)
    rng = np.random.default_rng(7)
    jobs, attained, since = [], {}, {}
    for i in range(400):
        kind = i % 3  # a whole GPU, a GPU share, CPU only
        j = job(f"j{i}", cpu=int(rng.integers(500, 8000)), gpus=0 if kind == 2 else 1,
                share=int(rng.integers(100, 1000)) if kind == 1 else 0, submit_time=float(rng.uniform(0, 500)))  # fmt: skip
        jobs.append(j)
        if i % 5:  # some have attained nothing
            attained[j.job_id] = float(rng.choice([100.0, 3600.0, rng.uniform(0, 8000)]))
        if i % 2:
            since[j.job_id] = float(rng.uniform(500, 900))
    now = 1000.0
    edge = job("edge", gpus=1, submit_time=now - (knob or 1.0) * 150.0)  # waited exactly knob × executed
    jobs.append(edge)
    attained["edge"] = 150.0
    ctx = OrderContext(attained_service=attained, queued_since=since)
    got = las.queues_of(np.array([attained.get(j.job_id, 0.0) for j in jobs]),
                        np.array([service_rate(j) for j in jobs]),
                        np.array([now - since.get(j.job_id, j.submit_time) for j in jobs]))  # fmt: skip
    want = [las.queue_of((j,), now, ctx) for j in jobs]
    assert got.tolist() == want
    assert len(set(want)) == 3  # every queue is reached
    if knob == 1.0:  # and the guard promotes some
        assert any(w == 0 and attained.get(j.job_id, 0.0) >= 100.0 for w, j in zip(want, jobs, strict=True))


def test_next_change_is_when_the_queues_first_change_with_time_alone():
    """Checked against the queues themselves: unchanged until ``next_change``, changed just after."""
    import numpy as np

    las = get_ordering("las", thresholds=(100.0, 3600.0), promote_knob=8.0)
    rng = np.random.default_rng(7)
    for _ in range(200):
        m = int(rng.integers(1, 6))
        attained = rng.choice([0.0, 50.0, 99.0, 500.0, 3599.0, 5000.0], m) + rng.uniform(0, 1, m)
        rate = rng.choice([0.5, 1.0, 2.0], m)
        waited = rng.uniform(0, 40_000, m)
        running = rng.random(m) < 0.5

        def queues(dt: float, attained=attained, rate=rate, waited=waited, running=running) -> np.ndarray:
            return las.queues_of(attained + np.where(running, rate, 0.0) * dt, rate, waited + dt)

        dt = las.next_change(attained, rate, waited, running)
        if dt == np.inf:
            assert all((queues(t) == queues(0)).all() for t in (1e3, 1e5, 1e7))
            continue
        assert dt > 0
        assert all((queues(t) == queues(0)).all() for t in np.linspace(0, dt * (1 - 1e-6), 20))
        assert not (queues(dt * (1 + 1e-6) + 1e-6) == queues(0)).all()
