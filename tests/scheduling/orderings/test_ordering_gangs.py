"""Every ordering keeps gang members adjacent, returns a permutation and is deterministic."""

import random

import pytest
from sched_builders import job

from scheduling.order_context import OrderContext
from scheduling.orderings import available_orderings, get_ordering


def mixed_jobs(seed: int):
    rng = random.Random(seed)
    jobs = []
    for i in range(30):
        kw = dict(tenant=rng.choice("ABC"), qos=rng.choice(["LS", "BE", "Burstable"]), priority=rng.randint(0, 2),
                  submit_time=float(rng.randint(0, 10)), trace_duration_s=rng.choice([None, 10.0, 100.0]),
                  runtime_estimate_s=rng.choice([None, 5.0, 50.0]), gpus=rng.choice([0, 1, 2]))  # fmt: skip
        if i % 5 == 0:  # a gang of three
            jobs += [job(f"g{i}-{m}", gang_id=f"g{i}", gang_size=3, **kw) for m in range(3)]
        else:
            jobs.append(job(f"j{i}", **kw))
    return jobs


def context(jobs):
    return OrderContext(capacity=(200_000.0, 200_000.0, 20_000.0), tenant_held={"A": (50_000.0, 0.0, 0.0)},
                        attained_service={j.job_id: 5000.0 for j in jobs[::4]})  # fmt: skip


def test_all_six_orderings_registered():
    assert set(available_orderings()) >= {"fifo", "sjf-oracle", "sjf-predicted", "las", "priority", "drf"}


@pytest.mark.parametrize("name", ["fifo", "sjf-oracle", "sjf-predicted", "las", "priority", "drf"])
def test_gangs_adjacent_permutation_deterministic(name):
    ordering = get_ordering(name)
    jobs = mixed_jobs(7)
    ctx = context(jobs)
    out = ordering.order(jobs, 1000.0, ctx)
    assert sorted(j.job_id for j in out) == sorted(j.job_id for j in jobs)
    positions: dict[str, list[int]] = {}
    for pos, j in enumerate(out):
        if j.gang_id:
            positions.setdefault(j.gang_id, []).append(pos)
    assert len(positions) == 6
    for gang, pos in positions.items():
        assert pos == list(range(pos[0], pos[0] + 3)), f"{name}: gang {gang} split: {pos}"
    shuffled = jobs[:]
    random.Random(1).shuffle(shuffled)
    assert [j.job_id for j in ordering.order(shuffled, 1000.0, ctx)] == [j.job_id for j in out]
