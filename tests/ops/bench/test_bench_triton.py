"""`semsched bench triton`'s large cluster: a node list and its allocations replicated (ops/bench/triton.py)."""

from __future__ import annotations

import numpy as np

from ops.bench.triton import replicated_cluster
from scheduling.job import JobRequest
from scheduling.node import NodeView
from scheduling.snapshot import ClusterSnapshot


def test_replicated_cluster_repeats_nodes_and_their_allocations():
    nodes = [NodeView(node_id="a", cpu_milli=8000, memory_mib=32768, num_gpu=2, gpu_model="T4"),
             NodeView(node_id="b", cpu_milli=4000, memory_mib=16384),
             NodeView(node_id="c", cpu_milli=16000, memory_mib=65536, num_gpu=4, gpu_model="A10")]  # fmt: skip
    snap = ClusterSnapshot.from_nodes(nodes)
    snap.reserve(0, JobRequest(job_id="j1", cpu_milli=2000, memory_mib=1024, num_gpu=1, per_gpu_milli=500), [1])
    snap.reserve(2, JobRequest(job_id="j2", cpu_milli=1000, memory_mib=2048, num_gpu=2, per_gpu_milli=1000), [0, 3])
    big = replicated_cluster(snap, nodes, 7)
    assert big.num_nodes == 7 and len(set(big.node_ids)) == 7
    base = np.arange(7) % 3
    np.testing.assert_array_equal(big.cpu_free, snap.cpu_free[base])
    np.testing.assert_array_equal(big.mem_free, snap.mem_free[base])
    np.testing.assert_array_equal(big.gpu_free_milli, snap.gpu_free_milli[base])
    np.testing.assert_array_equal(big.gpu_free[:, :4], snap.gpu_free[base][:, :4])


def test_churn_places_pending_jobs_and_ends_earlier_ones_keeping_the_queue_size():
    from inference.training.step_latency import Churn

    nodes = [NodeView(node_id=f"n{i}", cpu_milli=16000, memory_mib=65536, num_gpu=2, gpu_model="T4") for i in range(4)]
    snap = ClusterSnapshot.from_nodes(nodes)
    pods = [JobRequest(job_id=f"j{i}", cpu_milli=1000, memory_mib=1024, num_gpu=1, per_gpu_milli=500) for i in range(20)]
    queue = pods[:6]
    churn = Churn(snap, queue, pods, 2)
    churn()
    assert len(queue) == 6 and [j.job_id for j in queue[:2]] == ["j6", "j7"] and len(churn.placed) == 2
    used = int(snap.gpu_cap_milli.sum() - snap.gpu_free_milli.sum())
    churn()  # two end, two more start: the load stays
    assert len(churn.placed) == 2 and int(snap.gpu_cap_milli.sum() - snap.gpu_free_milli.sum()) == used
