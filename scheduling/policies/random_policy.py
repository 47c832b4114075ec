"""``random``: a uniformly random feasible node, and a random GPU inside it.

The published baseline (the simulator's ``RandomScore`` with random GPU selection): every
decision draws a fresh random score per node from a seeded generator, so a run is
reproducible for a given ``seed``; a sharing pod goes to a random GPU that holds it, whole
GPUs are the lowest-index fully free ones.
"""

from __future__ import annotations

import numpy as np

from scheduling.gpu_select import select_gpus as best_fit_gpus
from scheduling.job import JobRequest
from scheduling.policies.base import BasePolicy
from scheduling.policies.registry import register
from scheduling.policies.sim_conventions import is_sharing
from scheduling.snapshot import ClusterSnapshot


@register("random")
class RandomFit(BasePolicy):
    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def score(self, job: JobRequest, snapshot: ClusterSnapshot, feasible_mask: np.ndarray) -> np.ndarray:
        return self.rng.random(snapshot.num_nodes)

    def select_gpus(self, snapshot: ClusterSnapshot, node_index: int, job: JobRequest) -> tuple[int, ...] | None:
        if not is_sharing(job):
            return best_fit_gpus(snapshot, node_index, job)
        fits = np.flatnonzero(snapshot.gpu_free[node_index] >= job.per_gpu_milli)
        return (int(self.rng.choice(fits)),) if len(fits) else None
