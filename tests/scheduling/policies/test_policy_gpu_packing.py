"""gpu-packing: partly used GPUs first, then free GPUs of used nodes, then free nodes."""

from __future__ import annotations

import numpy as np
from sched_builders import job, node, snap

from scheduling.policies import get_policy


def _scores(s, j):
    return list(get_policy("gpu-packing").score(j, s, np.ones(s.num_nodes, dtype=bool)))


def test_the_three_bands_by_hand():
    s = snap(node("shared", gpus=2, gpu_alloc=(400, 0)),  # a GPU with 600m free
             node("used", gpus=2, gpu_alloc=(1000, 0)),
             node("free-2", gpus=2), node("free-8", gpus=8))  # fmt: skip
    # sharing 500m: 100 - 60/10 = 94 on the shared GPU; 50 - 1 on a used node; 33 - #GPUs on free ones
    assert _scores(s, job(gpus=1, share=500)) == [94.0, 49.0, 31.0, 25.0]
    # one whole GPU: no partly used GPU can take it; 50 - 1 on both used nodes
    assert _scores(s, job(gpus=1)) == [49.0, 49.0, 31.0, 25.0]
    assert _scores(s, job(cpu=2000)) == [0.0] * 4  # CPU-only: no preference


def test_the_fullest_gpu_that_fits_sets_the_shared_score():
    s = snap(node("a", gpus=2, gpu_alloc=(700, 100)), node("b", gpus=1, gpu_alloc=(500,)))
    # a: the fullest GPU holding 300m has 300m free -> 100 - 3 = 97; b: 500m free -> 95
    assert _scores(s, job(gpus=1, share=300)) == [97.0, 95.0]
