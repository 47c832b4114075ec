"""least-allocated: kube-scheduler's default scoring (LeastAllocated + BalancedAllocation, cpu and memory)."""

from __future__ import annotations

import numpy as np
import pytest
from sched_builders import job, node, snap

from scheduling.policies import get_policy


def _scores(s, j, **kw) -> np.ndarray:
    return get_policy("least-allocated", **kw).score(j, s, np.ones(s.num_nodes, dtype=bool))


def _best(s, j, **kw) -> str:
    return str(s.node_ids[int(np.argmax(_scores(s, j, **kw)))])


def test_scores_by_hand():
    # after placement: cpu 6/10 used, memory 200/1000 used
    s = snap(node("a", cpu=10_000, mem=1000, cpu_alloc_milli=5000, memory_alloc_mib=100))
    fit = 100 * ((1 - 0.6) + (1 - 0.2)) / 2  # 60
    balanced = 100 * (1 - abs(0.6 - 0.2) / 2)  # 80
    assert _scores(s, job(cpu=1000, mem=100))[0] == pytest.approx(fit + balanced)
    assert _scores(s, job(cpu=1000, mem=100), balanced=False)[0] == pytest.approx(fit)


def test_spreads_to_the_emptiest_node():
    s = snap(node("busy", cpu_alloc_milli=24_000, memory_alloc_mib=49_152), node("idle"), node("half", cpu_alloc_milli=16_000,
                                                                               memory_alloc_mib=32_768))  # fmt: skip
    assert _best(s, job(cpu=2000, mem=2048)) == "idle"


def test_balance_decides_between_equally_free_nodes():
    # both leave (cpu + memory) / 2 = 50 % free; "even" fills its two resources together
    s = snap(node("lopsided", cpu=10_000, mem=1000, cpu_alloc_milli=8000), node("even", cpu=10_000, mem=1000,
                                                                         cpu_alloc_milli=3000, memory_alloc_mib=500))  # fmt: skip
    assert _best(s, job(cpu=1000, mem=0)) == "even"


def test_gpus_are_not_scored_by_default_as_in_the_stock_profile():
    # the stock profile does not see GPUs: the emptiest node by cpu and memory wins, whatever its GPUs hold
    s = snap(
        node("eight-free", gpus=8, cpu_alloc_milli=16_000),
        node("one-left", gpus=8, gpu_alloc=(1000,) * 7 + (0,)),
    )
    assert _best(s, job(gpus=1)) == "one-left"
    assert _best(s, job(gpus=1), gpu_weight=10.0) == "eight-free"


def test_a_resource_the_node_lacks_is_left_out_of_both_scores():
    s = snap(node("cpu-only", cpu=10_000, mem=1000))
    score = _scores(s, job(cpu=5000, mem=500), gpu_weight=1.0)[0]
    # fit over cpu and memory alone (50 each; the GPU weight does not count here): 50; balance: 100
    assert score == pytest.approx(50 + 100)


def test_weights_are_validated():
    with pytest.raises(ValueError, match="least-allocated weights"):
        get_policy("least-allocated", cpu_weight=0, memory_weight=0)
    with pytest.raises(ValueError, match="least-allocated weights"):
        get_policy("least-allocated", cpu_weight=-1)
