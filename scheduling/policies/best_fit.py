"""``best-fit``: FIFO order; the node left with the least free resources after placement.

kube-scheduler's ``MostAllocated`` scoring, GPU-dominant: the score is the weighted mean
of each resource's utilisation *after* the job is placed (GPU weight 0.6, cpu 0.2,
memory 0.2 by default), so the tightest node wins and big holes stay open for big jobs.
A resource a node does not have (no GPUs) counts as fully used, which steers CPU-only
jobs away from GPU nodes when there is a choice. Ties go to the lowest node index.
"""

from __future__ import annotations

import numpy as np

from scheduling.job import JobRequest
from scheduling.policies.base import BasePolicy
from scheduling.policies.registry import register
from scheduling.snapshot import ClusterSnapshot


def utilisation_after(cap: np.ndarray, free: np.ndarray, request: int) -> np.ndarray:
    """``(used + request) / capacity`` per node, clipped to [0, 1]; 1 where capacity is 0."""
    safe = np.maximum(cap, 1)
    util = (cap - free + request) / safe
    return np.where(cap > 0, np.clip(util, 0.0, 1.0), 1.0)


@register("best-fit")
class BestFit(BasePolicy):
    name = "best-fit"

    def __init__(self, gpu_weight: float = 0.6, cpu_weight: float = 0.2, memory_weight: float = 0.2) -> None:
        total = gpu_weight + cpu_weight + memory_weight
        if min(gpu_weight, cpu_weight, memory_weight) < 0 or total <= 0:
            raise ValueError("best-fit weights must be >= 0 and not all 0")
        self.weights = (gpu_weight / total, cpu_weight / total, memory_weight / total)

    def score(self, job: JobRequest, snapshot: ClusterSnapshot, feasible_mask: np.ndarray) -> np.ndarray:
        wg, wc, wm = self.weights
        score = wc * utilisation_after(snapshot.cpu_cap, snapshot.cpu_free, job.cpu_milli)
        score += wm * utilisation_after(snapshot.mem_cap, snapshot.mem_free, job.memory_mib)
        score += wg * utilisation_after(snapshot.gpu_cap_milli, snapshot.gpu_free_milli, job.gpu_demand_milli)
        return score
