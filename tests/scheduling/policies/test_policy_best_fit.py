import numpy as np
from sched_builders import job, node, snap

from scheduling.policies import get_policy


def _best(s, j) -> str:
    scores = get_policy("best-fit").score(j, s, np.ones(s.num_nodes, dtype=bool))
    return str(s.node_ids[int(np.argmax(scores))])


def test_picks_the_tightest_gpu_node():
    s = snap(node("eight", gpus=8), node("two", gpus=2), node("two-half-used", gpus=2, gpu_alloc=(1000, 0)))
    assert _best(s, job(gpus=1)) == "two-half-used"


def test_fractional_prefers_node_with_partly_used_gpus():
    s = snap(node("fresh", gpus=1), node("shared", gpus=1, gpu_alloc=(300,)))
    assert _best(s, job(gpus=1, share=500)) == "shared"


def test_cpu_tightness_breaks_gpu_ties():
    s = snap(node("big", gpus=1, cpu=64_000), node("small", gpus=1, cpu=8_000))
    assert _best(s, job(cpu=4000, gpus=1)) == "small"


def test_scores_are_utilisation_after_placement():
    s = snap(node("a", gpus=2, cpu=10_000, mem=1000))
    score = get_policy("best-fit").score(job(cpu=5000, mem=500, gpus=1), s, np.ones(1, dtype=bool))
    assert score[0] == np.float64(0.5)  # every resource half used after placement
    cpu_only = snap(node("gpu", gpus=1, cpu=10_000, mem=1000), node("cpu", cpu=10_000, mem=1000))
    assert _best(cpu_only, job(cpu=5000, mem=500)) == "cpu"  # a node without GPUs counts as GPU-full
