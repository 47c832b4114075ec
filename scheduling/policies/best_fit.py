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
from scheduling.policies.sim_conventions import MAX_NODE_SCORE, MAX_SPEC_CPU, MAX_SPEC_GPU, request_cpu
from scheduling.snapshot import ClusterSnapshot


def inverse_capacity(cap: np.ndarray) -> np.ndarray:
    """``1 / capacity`` per node, 0 where the node has none (read-only)."""
    inv = np.divide(1.0, cap, out=np.zeros(len(cap)), where=cap > 0)
    inv.setflags(write=False)
    return inv


def inverse_capacities(snapshot: ClusterSnapshot) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``1 / capacity`` of cpu, memory and GPU milli per node (0 where the node has none); cache it
    per node table under :data:`INVERSE_CAPACITIES`."""
    return (inverse_capacity(snapshot.cpu_cap), inverse_capacity(snapshot.mem_cap),
            inverse_capacity(snapshot.gpu_cap_milli))  # fmt: skip


INVERSE_CAPACITIES = "inverse-capacity"  # the static_cache key of inverse_capacities


def utilisation_after(free: np.ndarray, inv_cap: np.ndarray, request: int) -> np.ndarray:
    """``1 − (free − request) / capacity``: the share used once ``request`` is placed;
    1 where the node has none of the resource (``inv_cap`` 0)."""
    return 1.0 - (free - request) * inv_cap


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
        inv_cpu, inv_mem, inv_gpu = snapshot.static_cache(INVERSE_CAPACITIES, inverse_capacities)
        score = wc * utilisation_after(snapshot.cpu_free, inv_cpu, job.cpu_milli)
        score += wm * utilisation_after(snapshot.mem_free, inv_mem, job.memory_mib)
        score += wg * utilisation_after(snapshot.gpu_free_milli, inv_gpu, job.gpu_demand_milli)
        return score


@register("best-fit-leftover")
class BestFitLeftover(BasePolicy):
    """``best-fit-leftover``: the FGD authors' ``BestFit`` — the node left with the least free
    cpu and GPU milli in absolute terms after placement.

    ``⌊100 × (1 − ½·(free cpu − request)/128 cores − ½·(free GPU milli − request)/8 GPUs)⌋``
    (normalised by the largest node, not by each node's capacity; memory is not scored;
    integer scores, ties to the node priority). GPUs inside the node: best fit. Their
    min–max rescaling of the scores to 0..100 keeps the order (the range never exceeds 100),
    so it is left out.
    """

    name = "best-fit-leftover"

    def __init__(self, quantize: bool = True) -> None:
        self.quantize = quantize

    def score(self, job: JobRequest, snapshot: ClusterSnapshot, feasible_mask: np.ndarray) -> np.ndarray:
        cpu_left = (snapshot.cpu_free - request_cpu(job)) / MAX_SPEC_CPU
        gpu_left = (snapshot.gpu_free_milli - job.gpu_demand_milli) / MAX_SPEC_GPU
        score = MAX_NODE_SCORE * (1.0 - 0.5 * cpu_left - 0.5 * gpu_left)
        return np.floor(score) if self.quantize else score
