"""gpu-clustering: pods with the same kind of GPU request go together."""

from __future__ import annotations

import numpy as np
from sched_builders import job, node, snap

from scheduling.assign import place_one
from scheduling.policies import get_policy
from scheduling.step_result import Placement


def test_bands_follow_the_affinities_of_the_pods_placed():
    s = snap(node("share-only", gpus=8), node("mixed", gpus=8), node("whole-only", gpus=8), node("idle", gpus=8))
    policy = get_policy("gpu-clustering")
    for i, (target, j) in enumerate([(0, job(gpus=1, share=500)), (1, job(gpus=1, share=500)),
                                     (1, job(gpus=2)), (2, job(gpus=1))]):  # fmt: skip
        mask = np.zeros(4, dtype=bool)
        mask[target] = True
        assert isinstance(place_one(s, job(f"p{i}", gpus=j.num_gpu, share=j.per_gpu_milli), policy,
                                    filters=[_Only(mask)]), Placement)  # fmt: skip
    scores = policy.score(job(gpus=1, share=200), s, np.ones(4, dtype=bool))
    # fill bonus ⌊25·(8000 − free)/8000⌋: share-only 500m used -> 1; mixed 2500m -> 7; whole-only 1000m -> 3
    assert list(scores) == [75 + 1, 50 + 7, 0 + 3, 25 + 0]
    assert list(policy.score(job(cpu=1000), s, np.ones(4, dtype=bool))) == [0.0] * 4


def test_a_node_whose_pods_all_left_is_idle_again():
    s = snap(node("n", gpus=1))
    policy = get_policy("gpu-clustering")
    j = job("a", gpus=1)
    placed = place_one(s, j, policy)
    assert isinstance(placed, Placement)
    # other affinity (band 0) + fill ⌊25·(8000 − 0)/8000⌋ (free GPU milli is measured against 8 GPUs)
    assert policy.score(job(gpus=1, share=100), s, np.ones(1, dtype=bool))[0] == 25
    s.free(placed.node_index, j, placed.gpu_indices)
    assert policy.score(job(gpus=1, share=100), s, np.ones(1, dtype=bool))[0] == 25 + 21  # idle again


def test_a_gang_rolled_back_leaves_no_affinity_behind():
    """A gang's first member placed, the second not: the rollback freed its GPUs, but the affinity
    select_gpus recorded stayed, and moved the node into another score band for a pod that never
    ran (found by the scheduling review: 40 -> 15)."""
    from scheduling.assign import schedule_step

    s = snap(node("n0", gpus=4, gpu_alloc=(1000, 0, 0, 0)), node("n1", gpus=2, gpu_alloc=(1000, 0)),
             node("n2", gpus=4, gpu_alloc=(1000, 1000, 1000, 1000)))  # fmt: skip
    policy, fresh = get_policy("gpu-clustering"), get_policy("gpu-clustering")
    gang = [job(f"g{i}", gpus=3, gang_id="g", gang_size=2) for i in range(2)]  # g0 fits n0, g1 nowhere now
    r = schedule_step(s, gang, policy, now=0)
    assert r.placements == [] and not r.unschedulable[0].permanent
    x = job("x", gpus=1)
    feasible = np.ones(3, dtype=bool)
    assert list(policy.score(x, s, feasible)) == list(fresh.score(x, s, feasible)) == [40.0, 46.0, 50.0]
    assert policy.affinities == {}


class _Only:
    """A filter that admits only the nodes of ``mask`` (steers the placements above)."""

    name = "only"

    def __init__(self, mask: np.ndarray) -> None:
        self._mask = mask

    def mask(self, job, snapshot) -> np.ndarray:
        return self._mask

    def reason(self, job) -> str:
        return "not chosen"
