"""``least-allocated``: kube-scheduler's default scoring — spread, and keep a node's resources in step.

The default profile's two resource score plugins, weight 1 each, summed:

- ``NodeResourcesFit`` with the ``LeastAllocated`` strategy: per resource, the share left free
  *after* the pod is placed, ``(capacity − requested) / capacity × 100``, averaged with the
  resource weights (cpu 1, memory 1 in the default profile) over the resources the node has (one
  it does not have is left out of the sum and of the weights, as kube-scheduler's
  ``leastResourceScorer`` skips a resource with nothing allocatable);
- ``NodeResourcesBalancedAllocation``: ``(1 − std) × 100`` over the same resources' requested
  fractions after placement (capped at 1), so a node whose cpu and memory fill together wins
  (a resource the node does not have is left out of the spread).

GPUs are an extended resource that the default profile does not score (``gpu_weight`` 0): a
GPU pod goes to the emptiest node by cpu and memory, wherever its GPUs stand. That is the
reference a user running the stock scheduler has; ``best-fit`` is its ``MostAllocated`` mirror.
GPUs inside the node: best fit (:mod:`scheduling.gpu_select`). Scores are not truncated to
integers; ties go to the lowest node index (kube-scheduler picks among ties at random). Not
modelled: the non-zero default requests kube-scheduler assumes for a pod that requests no cpu or
memory, and its skipping BalancedAllocation for such pods (162 of the 20,139 Google 2011 jobs
request no cpu, one openb pod no memory, no dlrm2025 job).
"""

from __future__ import annotations

import numpy as np

from scheduling.job import JobRequest
from scheduling.policies.base import BasePolicy
from scheduling.policies.best_fit import INVERSE_CAPACITIES, inverse_capacities, utilisation_after
from scheduling.policies.registry import register
from scheduling.policies.sim_conventions import MAX_NODE_SCORE
from scheduling.snapshot import ClusterSnapshot


@register("least-allocated")
class LeastAllocated(BasePolicy):
    name = "least-allocated"

    def __init__(self, cpu_weight: float = 1.0, memory_weight: float = 1.0, gpu_weight: float = 0.0,
                 balanced: bool = True) -> None:  # fmt: skip
        weights = np.array([cpu_weight, memory_weight, gpu_weight], dtype=float)
        if (weights < 0).any() or weights.sum() <= 0:
            raise ValueError("least-allocated weights must be >= 0 and not all 0")
        self.weights, self.balanced = weights, balanced

    def score(self, job: JobRequest, snapshot: ClusterSnapshot, feasible_mask: np.ndarray) -> np.ndarray:
        inverse = snapshot.static_cache(INVERSE_CAPACITIES, inverse_capacities)
        free = (snapshot.cpu_free, snapshot.mem_free, snapshot.gpu_free_milli)
        request = (job.cpu_milli, job.memory_mib, job.gpu_demand_milli)
        scored = [i for i, w in enumerate(self.weights) if w > 0]
        # requested fraction after placement per scored resource, capped at 1 (masked where the node has none)
        used = np.stack([utilisation_after(free[i], inverse[i], request[i]) for i in scored]).clip(0.0, 1.0)
        has = np.stack([inverse[i] > 0 for i in scored])
        weights = self.weights[scored][:, None]
        present = weights * has  # [R, N]: a resource the node lacks weighs nothing there
        score = MAX_NODE_SCORE * (present * (1.0 - used)).sum(axis=0) / np.maximum(present.sum(axis=0), 1e-12)
        if self.balanced:
            count = has.sum(axis=0)
            mean = np.where(has, used, 0.0).sum(axis=0) / np.maximum(count, 1)
            spread = np.sqrt(np.where(has, (used - mean) ** 2, 0.0).sum(axis=0) / np.maximum(count, 1))
            score = score + MAX_NODE_SCORE * (1.0 - spread)
        return score
