from sched_builders import job, node, snap

from scheduling.assign import schedule_step
from scheduling.order_context import OrderContext, cluster_capacity
from scheduling.orderings import get_ordering
from scheduling.orderings.drf import dominant_share
from scheduling.policies import get_policy

DRF = get_ordering("drf")
GIB = 1024


def ids(jobs):
    return [j.job_id for j in jobs]


def paper_tasks(n=5):
    """The DRF paper's example: A's tasks <1 CPU, 4 GB>, B's <3 CPUs, 1 GB>."""
    a = [job(f"a{i}", cpu=1000, mem=4 * GIB, tenant="A") for i in range(n)]
    b = [job(f"b{i}", cpu=3000, mem=1 * GIB, tenant="B") for i in range(n)]
    return a + b


PAPER_CAPACITY = (9000.0, 18.0 * GIB, 0.0)


def test_paper_example_progressive_filling_order():
    order = ids(DRF.order(paper_tasks(), 0.0, OrderContext(capacity=PAPER_CAPACITY)))
    # shares after each grant: A 2/9, B 1/3, A 4/9, B 2/3, A 2/3 (tie → FIFO: a3 before b2), A 8/9, B 1 …
    assert order[:7] == ["a0", "b0", "a1", "b1", "a2", "a3", "b2"]
    assert sorted(order) == sorted(ids(paper_tasks()))


def test_paper_example_end_to_end_gives_a_three_tasks_and_b_two():
    cluster = snap(node("n", cpu=9000, mem=18 * GIB))
    ctx = OrderContext(capacity=cluster_capacity(cluster))
    result = schedule_step(cluster, paper_tasks(), get_policy("drf+fifo-first-fit"), now=0.0, context=ctx)
    placed = [p.job_id for p in result.placements]
    assert sorted(placed) == ["a0", "a1", "a2", "b0", "b1"]
    # plain FIFO (A's tasks listed first, all submitted at t=0 → job id order) is not fair:
    fifo = schedule_step(cluster, paper_tasks(), get_policy("fifo-first-fit"), now=0.0)
    assert sorted(p.job_id for p in fifo.placements) == ["a0", "a1", "a2", "a3", "b0"]


def test_running_jobs_count_towards_the_share():
    jobs = [job("a-new", cpu=1000, tenant="A", submit_time=0.0), job("b-new", cpu=1000, tenant="B", submit_time=9.0)]
    ctx = OrderContext(capacity=(10_000.0, 100_000.0, 0.0), tenant_held={"A": (5000.0, 0.0, 0.0)})
    assert ids(DRF.order(jobs, 10.0, ctx)) == ["b-new", "a-new"]
    assert ids(DRF.order(jobs, 10.0, OrderContext(capacity=(10_000.0, 100_000.0, 0.0)))) == ["a-new", "b-new"]


def test_dominant_resource_is_gpu_for_gpu_heavy_tenant():
    capacity = (100_000.0, 100_000.0, 8000.0)
    ctx = OrderContext(capacity=capacity, tenant_held={"gpu": (1000.0, 1000.0, 2000.0),  # 25% of GPUs
                                                       "cpu": (20_000.0, 1000.0, 0.0)})  # 20% of CPUs  # fmt: skip
    assert dominant_share((1000.0, 1000.0, 2000.0), capacity) == 0.25
    jobs = [job("g", gpus=1, tenant="gpu"), job("c", cpu=1000, tenant="cpu", submit_time=5.0)]
    assert ids(DRF.order(jobs, 0.0, ctx)) == ["c", "g"]


def test_fifo_inside_a_tenant_and_zero_capacity_resources_ignored():
    jobs = [job("x2", tenant="X", submit_time=2.0), job("x1", tenant="X", submit_time=1.0),
            job("y1", tenant="Y", submit_time=3.0)]  # fmt: skip
    order = ids(DRF.order(jobs, 0.0, OrderContext(capacity=(10_000.0, 10_000.0, 0.0))))
    assert order.index("x1") < order.index("x2")
    assert order == ["x1", "y1", "x2"]


def test_without_capacity_shares_of_total_demand_alternate_equal_tenants():
    jobs = [job(f"{t}{i}", tenant=t, submit_time=float(i)) for t in "PQ" for i in range(3)]
    assert ids(DRF.order(jobs, 0.0)) == ["P0", "Q0", "P1", "Q1", "P2", "Q2"]


def test_gang_is_granted_as_one_unit():
    gang = [job(f"g{i}", cpu=3000, tenant="A", gang_id="g", gang_size=2) for i in (1, 2)]
    jobs = [*gang, job("a-solo", cpu=1000, tenant="A", submit_time=1.0),
            job("b1", cpu=2000, tenant="B", submit_time=2.0), job("b2", cpu=2000, tenant="B", submit_time=3.0)]
    order = ids(DRF.order(jobs, 0.0, OrderContext(capacity=(20_000.0, 1e9, 0.0))))
    # A's gang (6000 = 30%) goes first; B catches up (10%, 20%) before A's next job (35%)
    assert order == ["g1", "g2", "b1", "b2", "a-solo"]
