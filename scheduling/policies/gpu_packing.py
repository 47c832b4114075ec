"""``gpu-packing``: use partly used GPUs first, then free GPUs on used nodes, then free nodes.

The published baseline (the simulator's ``GpuPackingScore``), integer scores from high to low:

1. the pod fits on partly used GPUs (a sharing pod on the fullest GPU that holds it):
   ``100 − ⌊free share of those GPUs in %⌋ / 10``, at least 50;
2. it needs fully free GPUs of a node that is already in use: ``50 − #free GPUs taken``,
   at least 33;
3. the node is entirely free: ``33 − #GPUs``, at least ``#GPUs`` (small nodes first).

CPU-only pods score 0 everywhere (node priority decides). GPUs inside the node: best fit
(:mod:`scheduling.gpu_select`), which is the choice the score assumes.
"""

from __future__ import annotations

import numpy as np

from scheduling.job import JobRequest
from scheduling.policies.base import BasePolicy
from scheduling.policies.registry import register
from scheduling.policies.sim_conventions import MAX_NODE_SCORE, is_sharing
from scheduling.resources import FULL_GPU_MILLI
from scheduling.snapshot import ClusterSnapshot


@register("gpu-packing")
class GpuPacking(BasePolicy):
    name = "gpu-packing"

    def score(self, job: JobRequest, snapshot: ClusterSnapshot, feasible_mask: np.ndarray) -> np.ndarray:
        n = snapshot.num_nodes
        if job.num_gpu == 0:
            return np.zeros(n)
        full = snapshot.gpu_full_free.astype(np.int64)
        free_node = np.maximum(MAX_NODE_SCORE // 3 - full, full)  # case 3
        if is_sharing(job):
            free = snapshot.gpu_free
            tightest = np.where(free >= job.per_gpu_milli, free, FULL_GPU_MILLI + 1).min(axis=1)
            fresh = tightest >= FULL_GPU_MILLI  # only fully free GPUs hold it: takes one of them
            shared = np.maximum(MAX_NODE_SCORE - (tightest * 100 // FULL_GPU_MILLI) // 10, MAX_NODE_SCORE // 2)
            used = np.where(fresh, np.maximum(MAX_NODE_SCORE // 2 - 1, MAX_NODE_SCORE // 3), shared)
        else:
            used = np.full(n, max(MAX_NODE_SCORE // 2 - job.num_gpu, MAX_NODE_SCORE // 3))
        return np.where(full == snapshot.num_gpu, free_node, used).astype(np.float64)
