from sched_builders import job, node, snap

from scheduling.order_context import cluster_capacity, demand, service_rate, tenant_usage


def test_tenant_usage_sums_running_jobs_per_tenant():
    running = [job("a1", cpu=1000, mem=10, gpus=2, tenant="A"), job("a2", cpu=500, mem=5, gpus=1, share=250, tenant="A"),
               job("b1", cpu=4000, tenant="B")]  # fmt: skip
    assert tenant_usage(running) == {"A": (1500.0, 15.0, 2250.0), "B": (4000.0, 1024.0, 0.0)}
    assert tenant_usage([]) == {}


def test_cluster_capacity_and_demand():
    cluster = snap(node("a", cpu=8000, mem=100, gpus=2), node("b", cpu=2000, mem=50))
    assert cluster_capacity(cluster) == (10_000.0, 150.0, 2000.0)
    assert demand(job("x", cpu=300, mem=7, gpus=1, share=400)) == (300.0, 7.0, 400.0)


def test_service_rate_counts_gpus_then_cores():
    assert service_rate(job("g", gpus=2)) == 2.0
    assert service_rate(job("s", gpus=1, share=250)) == 0.25
    assert service_rate(job("c", cpu=1500)) == 1.5
