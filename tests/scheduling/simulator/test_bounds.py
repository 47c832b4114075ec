import numpy as np
import pytest
from sched_builders import job, node

from scheduling.policies import get_policy
from scheduling.simulator import SimConfig, SimJob, simulate
from scheduling.simulator.bounds import instance_limit_bounds


def limited(job_id, submit, duration, app="web", limit=1, **kw):
    return SimJob(job(job_id, submit_time=submit, app=app, max_instances_per_node=limit, **kw), duration)


def queueing(result, job_ids):
    return sum(o.queueing_delay for o in result.outcomes if o.job_id in job_ids)


def test_the_floor_is_list_scheduling_of_the_apps_tasks_on_its_slots():
    nodes = [node("a"), node("b")]
    tasks = [limited(f"t{i}", 0, d) for i, d in enumerate([10, 30, 10, 10, 5])]
    (bound,) = instance_limit_bounds(nodes, tasks)
    # two slots: t0, t1 at 0; t2 at 10 (t0 done); t3 at 20 (t2 done); t4 at 30 (t1 and t3 done)
    assert (bound.app, bound.tasks, bound.slots) == ("web", 5, 2)
    assert bound.wait_s == 0 + 0 + 10 + 20 + 30
    assert bound.mean_wait_s == pytest.approx(12)


def test_slots_count_the_limit_on_nodes_where_a_task_fits_the_empty_cluster():
    nodes = [node("a"), node("b"), node("small", cpu=500)]
    tasks = [limited(f"t{i}", 0, 10, limit=2, cpu=1000) for i in range(7)]
    (bound,) = instance_limit_bounds(nodes, tasks)
    assert bound.slots == 4  # 2 per node on a and b; small cannot run one
    assert bound.wait_s == 3 * 10
    assert instance_limit_bounds(nodes, [SimJob(job("free"), 10)]) == []  # no limit, no bound


def test_a_task_that_fits_nowhere_has_no_bound():  # it is rejected, never queued
    assert instance_limit_bounds([node("a", cpu=500)], [limited("t", 0, 10, cpu=1000)]) == []


def test_an_app_of_two_shapes_has_no_bound():
    """Found by review: a later small task starts where an earlier big one does not fit, out of queue
    order, and every placement queued 99 s against a "floor" of 486 s."""
    nodes = [node("n0", cpu=10_000)]
    tasks = [limited("a", 0, 100, limit=2, cpu=6000), limited("b", 1, 100, limit=2, cpu=6000)]
    tasks += [limited(f"c{k}", 2 + k, 1, limit=2, cpu=4000) for k in range(5)]
    run = simulate(nodes, tasks, get_policy("fifo-first-fit"), SimConfig(step_s=1))
    assert queueing(run, {t.job_id for t in tasks}) == pytest.approx(99)
    assert instance_limit_bounds(nodes, tasks) == []
    assert len(instance_limit_bounds(nodes, tasks[:2])) == 1  # one shape: a floor


def test_the_floor_is_reached_when_nothing_else_competes():
    """Integer submits and run times on a 1 s step: a plain placement starts every task the
    moment a slot frees, so it queues exactly the floor."""
    nodes = [node(f"n{i}") for i in range(3)]
    rng = np.random.default_rng(3)
    tasks = [limited(f"t{i:02d}", int(s), int(d)) for i, (s, d) in
             enumerate(zip(np.sort(rng.integers(0, 20, 25)), rng.integers(5, 30, 25), strict=True))]  # fmt: skip
    (bound,) = instance_limit_bounds(nodes, tasks)
    run = simulate(nodes, tasks, get_policy("fifo-first-fit"), SimConfig(step_s=1))
    assert bound.wait_s > 0
    assert queueing(run, bound.job_ids) == pytest.approx(bound.wait_s)


@pytest.mark.parametrize("policy", ["fifo-first-fit", "best-fit", "least-allocated", "fgd", "random"])
def test_no_placement_queues_the_limited_tasks_less_than_the_floor(policy):
    nodes = [node(f"n{i}", gpus=2, cpu=8000, mem=16_384) for i in range(4)]
    rng = np.random.default_rng(11)
    tasks = [limited(f"w{i:02d}", float(s), float(d), cpu=2000) for i, (s, d) in
             enumerate(zip(np.sort(rng.uniform(0, 50, 30)), rng.uniform(5, 40, 30), strict=True))]  # fmt: skip
    others = [SimJob(job(f"o{i:02d}", submit_time=float(s), cpu=int(c), gpus=int(g)), float(d)) for i, (s, c, g, d) in
              enumerate(zip(rng.uniform(0, 50, 40), rng.integers(500, 6000, 40), rng.integers(0, 3, 40),
                            rng.uniform(5, 60, 40), strict=True))]  # fmt: skip
    (bound,) = instance_limit_bounds(nodes, tasks + others)
    run = simulate(nodes, tasks + others, get_policy(policy), SimConfig(step_s=1))
    assert bound.wait_s > 0
    assert queueing(run, bound.job_ids) >= bound.wait_s - 1e-9
