"""The fill method with the FGD paper's placement policies, on a case whose answer is known."""

from __future__ import annotations

from scheduling.fill import run_fill
from scheduling.job import JobRequest
from scheduling.metrics.fragmentation import PodType, Workload
from scheduling.node import NodeView
from scheduling.policies import get_policy

NODES = [NodeView(node_id=n, cpu_milli=64000, memory_mib=65536, num_gpu=1, gpu_model="T4") for n in ("a", "b")]


def share(i: int, milli: int) -> JobRequest:
    return JobRequest(job_id=f"p{i}", cpu_milli=100, memory_mib=100, num_gpu=1, per_gpu_milli=milli)


SEQ = [share(1, 400), share(2, 200), share(3, 600), share(4, 500)]


def test_fgd_keeps_room_for_the_workload_where_best_fit_strands_it():
    # best-fit puts 200m beside 400m (tightest), then 600m takes the other GPU: 400m + 400m left, 500m fails.
    # FGD (workload: 500m pods) keeps 600m whole for the 600m pod and places all four.
    bf = run_fill(NODES, SEQ, get_policy("best-fit"), seed=0)
    fgd = run_fill(NODES, SEQ, get_policy("fgd", workload=Workload((PodType(100, 500, 1),), (1.0,))), seed=0)
    assert (bf.placed, int(bf.allocated[-1])) == (3, 1200)
    assert (fgd.placed, int(fgd.allocated[-1])) == (4, 1700)


def test_every_baseline_is_reproducible_for_a_seed():
    for name in ("random", "dot-product", "gpu-packing", "gpu-clustering", "best-fit-leftover", "fgd"):
        kw = {"seed": 5} if name == "random" else {}
        runs = [run_fill(NODES, SEQ, get_policy(name, **kw), seed=5) for _ in range(2)]
        assert list(runs[0].allocated) == list(runs[1].allocated), name
