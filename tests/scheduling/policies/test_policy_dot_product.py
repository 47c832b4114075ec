"""dot-product: the node whose free vector aligns least with the request (Tetris, max-spec normalised)."""

from __future__ import annotations

import numpy as np
from sched_builders import job, node, snap

from scheduling.policies import get_policy


def test_scores_by_hand():
    # request (64 cores, 1 GPU) = (0.5, 0.125) of the largest node (128 cores, 8 GPUs)
    s = snap(node("roomy", gpus=8, cpu=128_000), node("snug", gpus=1, cpu=16_000))
    scores = get_policy("dot-product").score(job(cpu=64_000, gpus=1), s, np.ones(2, dtype=bool))
    # roomy: (1·0.5 + 1·0.125)/2 = 0.3125 -> 68; snug: (0.125·0.5 + 0.125·0.125)/2 -> 96
    assert list(scores) == [68.0, 96.0]


def test_gpu_heavy_pod_goes_where_the_gpus_are_nearly_gone():
    s = snap(node("gpus-left", gpus=8, cpu=16_000), node("cpu-left", gpus=8, cpu=128_000,
                                                        gpu_alloc=(1000,) * 6 + (0, 0)))  # fmt: skip
    scores = get_policy("dot-product", quantize=False).score(job(cpu=1000, gpus=2), s, np.ones(2, dtype=bool))
    assert s.node_ids[int(np.argmax(scores))] == "cpu-left"
