"""best-fit-leftover: the FGD authors' BestFit — least free cpu and GPU left, in absolute terms."""

from __future__ import annotations

import numpy as np
from sched_builders import job, node, snap

from scheduling.policies import get_policy


def test_absolute_leftover_not_utilisation():
    # "big": 1 of 8 GPUs free, 128 cores; "small": 2 free GPUs, 16 cores
    s = snap(node("big", gpus=8, cpu=128_000, gpu_alloc=(1000,) * 7 + (0,)), node("small", gpus=2, cpu=16_000))
    j = job(cpu=1000, gpus=1)
    scores = get_policy("best-fit-leftover").score(j, s, np.ones(2, dtype=bool))
    # big: 1 − ½·127/128 − ½·0/8 -> 50; small: 1 − ½·15/128 − ½·1/8 -> 87
    assert list(scores) == [50.0, 87.0]
    ours = get_policy("best-fit").score(j, s, np.ones(2, dtype=bool))
    assert s.node_ids[int(np.argmax(ours))] == "big"  # relative utilisation: the GPU-full node
