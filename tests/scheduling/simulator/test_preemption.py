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


def test_las_does_not_evict_within_the_same_queue_only_once_the_running_job_left_it():
    r, o = run([sj("A", 0, 10_000), sj("B", 2000, 100)])  # at B's arrival A has 2000 GPU-s: still queue 0
    # A crosses the 3,600 GPU-s threshold at 3,600 s with B waiting: a step then (no event comes: the
    # simulator steps when a rank changes with time alone, as the worker's clock would), and B evicts it
    assert o["B"].start == 3600 and r.reversals == 1
    fifo = run([sj("A", 0, 10_000), sj("B", 2000, 100)], policy="fifo-first-fit")[1]
    assert fifo["B"].start == 10_000


def test_fifo_never_preempts():
    r, o = run([sj("A", 0, 10_000), sj("B", 4000, 100)], policy="fifo-first-fit")
    assert o["B"].start == 10_000 and r.reversals == 0


def test_running_table_ranks_what_runs_now_as_queue_of_would():
    import numpy as np
    from sched_builders import snap

    from scheduling.order_context import OrderContext
    from scheduling.orderings import get_ordering
    from scheduling.simulator.preemption import RunningTable

    las = get_ordering("las", thresholds=(100.0, 3600.0), promote_knob=8.0)
    rng = np.random.default_rng(3)
    table, running, attained = RunningTable(), {}, {}
    for step in range(6):  # jobs start and stop; freed rows are reused
        for i in range(40):
            j = job(f"s{step}j{i}", gpus=1, share=int(rng.choice([0, 250, 500])), submit_time=float(step * 100))
            if rng.random() < 0.5:
                attained[j.job_id] = float(rng.uniform(0, 5000))
            running[j.job_id] = (j, float(step * 100 + rng.uniform(0, 50)))
            table.add(j, i % 3, (0,), running[j.job_id][1], attained.get(j.job_id, 0.0), j.submit_time)
        for job_id in list(running)[::3]:
            del running[job_id]
            table.remove(job_id)
    table.add(job("gang", gpus=1, gang_id="g", gang_size=2), 0, (0,), 0.0, 0.0, 0.0)  # never a victim
    assert len(table) == len(running) and len(table.alive) < 6 * 40  # rows were reused
    now = 560.0  # the last jobs started 10-60 s ago
    ctx = OrderContext(attained_service={j: attained.get(j, 0.0) + (now - s) * (1.0 if r.per_gpu_milli == 0
                                         else r.per_gpu_milli / 1000) for j, (r, s) in running.items()})  # fmt: skip
    want = {j: las.queue_of((r,), now, ctx) for j, (r, _) in running.items()}
    every = {v.job.job_id: v for v in table.victims(snap(node("a", gpus=1)), now, las, below=-1).victims}
    assert {j: v.queue for j, v in every.items()} == want
    assert all(v.attained == pytest.approx(ctx.attained_service[j]) for j, v in every.items())
    lower = table.victims(snap(node("a", gpus=1)), now, las, below=0)
    assert {v.job.job_id for v in lower.victims} == {j for j, q in want.items() if q > 0}
    assert 0 < len(lower) < len(every)


def test_a_restarted_job_is_ranked_by_its_wait_since_it_was_re_queued_not_since_submission():
    # C runs 0..3700 and is evicted by D (C left the top queue); C waits from 3700 and is promoted
    # (starvation: waited >= 8 x its 3,700 s) once it has waited 29,600 s, at the 33,300 s step, and
    # restarts, evicting D. E arrives at 33,400 in the top queue: C, running again, has waited
    # 33,400 - 3,700 = 29,700 s since it was re-queued, short of 8 x (3,700 + 100) = 30,400, so it is
    # in queue 1 and E evicts it. Ranked by its wait since submission (33,400 s) C stayed promoted and
    # E waited 19,900 s behind it (found by review).
    jobs = [sj("C", 0, 20_000), sj("D", 3700, 40_000), sj("E", 33_400, 100),
            SimJob(job("tick", submit_time=33_300), 1)]  # a CPU job: a step at 33,300  # fmt: skip
    r, o = run(jobs)
    assert o["C"].placements == 3 and o["D"].placements >= 1
    assert o["E"].start == 33_400 and o["E"].queueing_delay == 0


def test_a_starvation_promotion_is_acted_on_when_due_not_at_the_next_event():
    # C runs 0..3,700, evicted by D; it waits from 3,700 and its promotion (waited >= 8 x 3,700 s) is due
    # at 33,300 s. No event comes then: the step at 33,300 (a rank changed) restarts C, evicting D
    # (found by review: without a CPU job ticking at 33,300 it waited for the next arrival)
    r, o = run([sj("C", 0, 20_000), sj("D", 3700, 40_000)])
    assert o["C"].placements == 2 and o["C"].finish == 33_300 + 20_000  # (was 63,700: D's departure first)
    assert o["D"].placements == 2 and o["D"].finish == 53_300 + 40_000 and r.reversals == 2


def las(nodes, jobs):
    from scheduling.orderings.compose import ComposedPolicy
    from scheduling.orderings.las import DiscretisedLas

    policy = ComposedPolicy(DiscretisedLas(thresholds=(10.0,), promote_knob=None), get_policy("best-fit"))
    r = simulate(nodes, jobs, policy, SimConfig(step_s=1.0))
    return r, {o.job_id: o for o in r.outcomes}


def test_a_blocked_job_that_fits_after_an_earlier_eviction_evicts_no_one():
    """V1 and V2 hold 2 GPUs each of 4; evicting V2 makes room for both P1 and P2 (found by review: P2
    evicted V1 as well, which lost 20 s of work while a GPU stayed idle)."""
    jobs = [SimJob(job("V1", gpus=2, submit_time=0.0), 1000.0), SimJob(job("V2", gpus=2, submit_time=1.0), 1000.0),
            SimJob(job("P1", gpus=1, submit_time=20.0), 8.0), SimJob(job("P2", gpus=1, submit_time=20.0), 8.0)]
    r, o = las([node("n0", gpus=4)], jobs)
    assert r.reversals == 1 and o["V1"].placements == 1 and o["V2"].placements == 2
    assert o["P1"].start == o["P2"].start == 20.0


def test_what_an_eviction_left_free_is_used_at_the_next_step_not_the_next_event():
    """V holds both GPUs; P1 evicts it, and P2 (beyond the jobs the step tries to preempt for) fits the
    GPU left free: it starts one step later, not when P1 finishes (found by review)."""
    jobs = [SimJob(job("V", gpus=2, submit_time=0.0), 1000.0), SimJob(job("P1", gpus=1, submit_time=20.0), 8.0),
            SimJob(job("P2", gpus=1, submit_time=20.0), 8.0)]
    from scheduling.orderings.compose import ComposedPolicy
    from scheduling.orderings.las import DiscretisedLas

    policy = ComposedPolicy(DiscretisedLas(thresholds=(10.0,), promote_knob=None), get_policy("best-fit"))
    r = simulate([node("n0", gpus=2)], jobs, policy, SimConfig(step_s=1.0, preemption_checks=1))
    o = {x.job_id: x for x in r.outcomes}
    assert o["P1"].start == 20.0 and o["P2"].start == 21.0 and r.reversals == 1


def test_a_job_its_own_step_placed_is_taken_back_not_evicted():
    """Found by review: at 25 s the step placed A (queue 1) beside the blocked B (queue 0, two GPUs),
    then B's preemption evicted A again. That 0 s run counted as A's placement and as a reversal, and
    restarted A's wait. It is taken back now: A's runs are the one from 0 s and the one from 30 s."""
    from scheduling.orderings.compose import ComposedPolicy
    from scheduling.orderings.las import DiscretisedLas

    jobs = [SimJob(job("A", gpus=1, submit_time=0.0), 1000.0), SimJob(job("C", gpus=1, submit_time=0.0), 1000.0),
            SimJob(job("P", gpus=1, submit_time=20.0), 5.0),  # evicts A at 20 s (20 GPU-s > 10: queue 1)
            SimJob(job("B", gpus=2, submit_time=25.0), 5.0)]  # blocked at 25 s; A fits the GPU P left
    policy = ComposedPolicy(DiscretisedLas(thresholds=(10.0,), promote_knob=None), get_policy("best-fit"))
    r = simulate([node("n0", gpus=2)], jobs, policy, SimConfig(step_s=1.0))
    o = {x.job_id: x for x in r.outcomes}
    assert (o["B"].start, o["A"].start, o["A"].finish) == (25.0, 0.0, 1030.0)
    assert o["A"].placements == 2 and r.reversals == 2  # A evicted by P, C by B; 3 before the fix


def _gpu_node_jobs():  # (one node: 8 cores, 1 T4)
    from scheduling.job import JobRequest
    from scheduling.node import NodeView

    def j(job_id, t, d, cpu=1000, gpus=0, **kw):
        return SimJob(JobRequest(job_id, cpu_milli=cpu, memory_mib=1024, num_gpu=gpus, submit_time=t, **kw), d)

    return [NodeView("n0", cpu_milli=8000, memory_mib=65536, num_gpu=1, gpu_model="T4")], j


def test_a_victim_whose_eviction_freed_nothing_the_job_needed_goes_back():
    """Found by review: victims went lowest priority first until the job fit, and a CPU-only victim freed
    before the GPU one the job needed lost its run for nothing. The reprieve (kube-scheduler's) puts back
    every victim that still fits beside the job."""
    nodes, j = _gpu_node_jobs()
    jobs = [j("v2-gpu", 0, 1000, gpus=1), j("v1-cpu", 1, 1000), j("new-gpu", 100, 10, gpus=1)]
    r = simulate(nodes, jobs, get_policy("las+best-fit", ordering_options={"thresholds": (10.0,)}), SimConfig())
    o = {x.job_id: x for x in r.outcomes}
    assert (o["new-gpu"].start, o["v1-cpu"].placements, o["v1-cpu"].finish) == (100.0, 1, 1001.0)
    assert o["v2-gpu"].placements == 2 and r.reversals == 1  # the GPU's holder alone was evicted


def test_a_job_that_cannot_preempt_for_its_app_limit_does_not_stop_another_of_its_resources():
    """Found by review: the step's "found no node" memo was keyed by resources only, and a job whose app's
    per-node limit kept it off the node made a job of the same resources without that limit skip
    preemption: it waited 4,900 s for the next departure."""
    nodes, j = _gpu_node_jobs()
    jobs = [j("V-gpu", 0, 5000, gpus=1), j("W-web", 99, 5000, cpu=1, app="web"),
            j("A-web", 100, 10, gpus=1, app="web", max_instances_per_node=1), j("B", 100, 10, gpus=1)]  # fmt: skip
    policy = get_policy("las+best-fit", ordering_options={"thresholds": (10.0,), "promote_knob": None})
    o = {x.job_id: x for x in simulate(nodes, jobs, policy, SimConfig()).outcomes}
    assert o["B"].start == 100.0


def test_las_evicts_on_a_node_of_the_jobs_pool_not_the_one_with_the_fewest_victims():
    """B (pool p1) may run on y only; x (pool p2) holds one victim, y two. Found by review: the victims' node
    was chosen by count alone, x failed B's pool filter and the eviction was rolled back: B waited for A1."""
    nodes = [node("x", gpus=1, topology={"pool": "p2"}), node("y", gpus=1, topology={"pool": "p1"})]
    jobs = [sj("A1", 0, 50_000, node_pool="p1", share=500), sj("A2", 0, 50_000, node_pool="p1", share=500),
            sj("A3", 0, 50_000, node_pool="p2"), sj("B", 10_000, 100, node_pool="p1")]  # fmt: skip
    r = simulate(nodes, jobs, get_policy("las+fifo-first-fit"), SimConfig(step_s=1))
    o = {x.job_id: x for x in r.outcomes}
    assert o["B"].start == 10_000 and o["A3"].placements == 1 and o["A1"].placements == o["A2"].placements == 2


def test_las_evicts_on_a_node_where_the_jobs_app_limit_holds_once_the_victims_are_gone():
    """B (app web, one per node) evicts two victims on x or on y; x also runs W, a web instance that is no
    victim. Found by review: x was chosen by its victim count, failed B's app limit, and the eviction was
    rolled back: B waited until W could be evicted too."""
    nodes = [node("x", gpus=1), node("y", gpus=1)]
    jobs = [sj(v, 0, 50_000, share=500) for v in ("V0", "V1", "V2", "V3")]  # two on each GPU
    jobs += [SimJob(job("W", cpu=1000, app="web", submit_time=99), 50_000),
             sj("B", 100, 10, app="web", max_instances_per_node=1)]  # fmt: skip
    policy = get_policy("las+fifo-first-fit", ordering_options={"thresholds": (10.0,), "promote_knob": None})
    o = {x.job_id: x for x in simulate(nodes, jobs, policy, SimConfig(step_s=1)).outcomes}
    assert o["W"].start == 99 and o["B"].start == 100 and o["W"].placements == 1


def test_with_an_app_limit_the_victims_node_is_still_the_one_with_the_fewest_victims():
    """y holds four quarter-GPU victims, x one whole-GPU victim, z runs W (app web); B (web, one per node) can
    take y or x. Found by review of the app-limit change: the victim count was overwritten by the app's
    instance count, and B evicted all four on y."""
    nodes = [node("y", gpus=1, cpu=500), node("x", gpus=1, cpu=500), node("z", gpus=1)]
    jobs = [sj(f"Y{i}", 0, 50_000, cpu=100, share=250) for i in range(4)]
    jobs += [sj("X0", 1, 50_000, cpu=100), sj("Vz", 2, 50_000, cpu=100),
             SimJob(job("W", cpu=1000, app="web", submit_time=95), 50_000),
             sj("B", 100, 10, cpu=100, app="web", max_instances_per_node=1)]  # fmt: skip
    policy = get_policy("las+fifo-first-fit", ordering_options={"thresholds": (10.0,), "promote_knob": None})
    r = simulate(nodes, jobs, policy, SimConfig(step_s=1))
    o = {x.job_id: x for x in r.outcomes}
    assert o["B"].start == 100 and o["X0"].placements == 2 and all(o[f"Y{i}"].placements == 1 for i in range(4))


def test_the_reprieve_keeps_out_a_victim_its_apps_limits_refuse_beside_the_job():
    """x runs W (web, at most 2 a node) and V (web, no limit of its own, evictable); B (web) evicts V. Found by
    review: the reprieve checked only V's and B's own limits, put V back, and x ran three web instances."""
    jobs = [SimJob(job("W", cpu=1000, app="web", max_instances_per_node=2, submit_time=0), 50_000),
            SimJob(job("V", gpus=1, app="web", submit_time=1), 50_000),
            SimJob(job("B", cpu=1000, app="web", submit_time=100), 10)]  # fmt: skip
    policy = get_policy("las+fifo-first-fit", ordering_options={"thresholds": (10.0,), "promote_knob": None})
    o = {x.job_id: x for x in simulate([node("x", gpus=1)], jobs, policy, SimConfig(step_s=1)).outcomes}
    assert o["B"].start == 100 and o["V"].placements == 2 and o["V"].start == 1 and o["V"].finish > 50_100
