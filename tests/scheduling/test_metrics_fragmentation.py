"""Fragmentation of nodes and clusters for a target workload, on hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest
from sched_builders import job, node, snap

from scheduling.metrics.fragmentation import (
    PodType,
    Workload,
    cluster_fragmentation,
    fragmentation_rate,
    node_fragmentation,
    partial_gpu_ratio,
    tables_for,
)

HALF = PodType(1000, 500, 1)
TWO = PodType(1000, 1000, 2)


def test_node_fragmentation_by_hand():
    wl = Workload((HALF, TWO), (0.5, 0.5))
    s = snap(node("a", gpus=2, gpu_alloc=(0, 700)),  # free 1000m + 300m
             node("b", gpus=2),  # free 2000m
             node("c", gpus=2, gpu_alloc=(0, 0), cpu=500))  # fmt: skip
    f = node_fragmentation(s, wl)
    # a: HALF fits on GPU 0, the 300m GPU is fragment (0.5·300); TWO does not fit: all 1300m (0.5·1300)
    assert f[0] == pytest.approx(0.5 * 300 + 0.5 * 1300)
    assert f[1] == 0  # both types fit, no GPU below their share
    assert f[2] == pytest.approx(2000)  # 500m cpu: neither type fits, every free milli is fragment
    assert cluster_fragmentation(s, wl) == pytest.approx(f.sum())
    assert fragmentation_rate(s, wl) == pytest.approx(f.sum() / 5300)


def test_cpu_only_types_and_gpu_models():
    wl = Workload((PodType(1000, 0, 0), PodType(1000, 1000, 1, ("V100",))), (0.25, 0.75))
    s = snap(node("t4", gpus=1, model="T4"), node("v100", gpus=1, model="V100"))
    # a CPU-only pod can use no GPU: its share of the free milli is fragment everywhere;
    # the V100-only type cannot use a T4 at all
    assert list(node_fragmentation(s, wl)) == pytest.approx([1000, 250])


def test_partial_gpu_ratio():
    s = snap(node("a", gpus=2, gpu_alloc=(600, 0)), node("b", gpus=1, gpu_alloc=(1000,)))
    assert partial_gpu_ratio(s) == pytest.approx(400 / 1400)
    assert partial_gpu_ratio(snap(node("full", gpus=1, gpu_alloc=(1000,)))) == 0.0


def test_workload_estimate_keeps_the_popular_types_and_renormalises():
    pods = [job(f"a{i}", gpus=1, share=500) for i in range(7)] + [job(f"b{i}", gpus=1) for i in range(2)]
    pods.append(job("c", cpu=2000))
    wl = Workload.from_jobs(pods, coverage=0.9)
    assert wl.types == (HALF, PodType(1000, 1000, 1))
    assert np.allclose(wl.weights, (7 / 9, 2 / 9))
    assert Workload.from_jobs(pods, coverage=1.0).types[-1] == PodType(2000, 0, 0)
    assert PodType(2000, 0, 0) not in Workload.from_jobs(pods, coverage=1.0, cpu_only=False).types


def test_node_fragmentation_recomputes_changed_nodes_to_the_same_result():
    """Kept from call to call per node table, only changed nodes recomputed: equal, bit for bit, to
    computing every node afresh, over reservations, releases and two snapshots of one table."""
    wl = Workload((HALF, TWO, PodType(4000, 250, 1)), (0.4, 0.4, 0.2))
    s = snap(*[node(f"n{i}", gpus=4, cpu=16000) for i in range(6)])
    other = s.copy()
    assert other.table is s.table
    fresh = lambda x: tables_for(x, wl).node_frag(x.gpu_free, x.cpu_free, tables_for(x, wl).model_index)  # noqa: E731
    steps = [(0, job("a", gpus=1, share=300, cpu=2000), (1,)), (3, job("b", gpus=2, cpu=1000), (0, 2)),
             (0, job("c", gpus=1, share=700, cpu=12000), (1,))]  # fmt: skip
    for i, pod, gpus in steps:
        s.reserve(i, pod, gpus)
        assert np.array_equal(node_fragmentation(s, wl), fresh(s))
        assert np.array_equal(node_fragmentation(other, wl), fresh(other))  # (still empty)
    s.free(*steps[1])
    assert np.array_equal(node_fragmentation(s, wl), fresh(s))
    before = node_fragmentation(s, wl)
    before[:] = -1  # a caller's copy: changing it changes nothing kept
    assert np.array_equal(node_fragmentation(s, wl), fresh(s))
    assert not np.array_equal(fresh(s), fresh(other))  # (the two states differ: the checks above can fail)
