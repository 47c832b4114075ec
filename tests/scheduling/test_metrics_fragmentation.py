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
