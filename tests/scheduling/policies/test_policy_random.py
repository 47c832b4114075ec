"""random: seeded, reproducible, and only ever a feasible node / a GPU that fits."""

from __future__ import annotations

import numpy as np
from sched_builders import job, node, snap

from scheduling.assign import place_one
from scheduling.policies import get_policy
from scheduling.step_result import Placement


def test_same_seed_same_choices_other_seed_other_choices():
    s = snap(*[node(f"n{i}", gpus=1) for i in range(50)])
    mask = np.ones(50, dtype=bool)
    a, b, c = get_policy("random", seed=1), get_policy("random", seed=1), get_policy("random", seed=2)
    first = [int(np.argmax(a.score(job(), s, mask))) for _ in range(5)]
    assert first == [int(np.argmax(b.score(job(), s, mask))) for _ in range(5)]
    assert first != [int(np.argmax(c.score(job(), s, mask))) for _ in range(5)]
    assert len(set(first)) > 1  # a fresh draw every decision


def test_places_only_on_feasible_nodes_and_gpus_that_fit():
    s = snap(node("full", gpus=1, gpu_alloc=(1000,)), node("n", gpus=3, gpu_alloc=(900, 0, 200)))
    policy = get_policy("random", seed=3)
    gpus = set()
    for i in range(30):
        out = place_one(s.copy(), job(f"j{i}", gpus=1, share=500), policy)
        assert isinstance(out, Placement) and out.node_id == "n"
        gpus.update(out.gpu_indices)
    assert gpus == {1, 2}  # GPU 0 has 100m free: never
    assert policy.select_gpus(s, 1, job(gpus=1)) == (1,)  # whole GPUs: the lowest free one
