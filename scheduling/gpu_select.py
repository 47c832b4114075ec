"""Which physical GPUs of a chosen node a job gets.

Best-fit per GPU: among the node's GPUs with at least ``per_gpu_milli`` free, take the
ones with the least free share (ties → lowest index). A fractional request therefore
lands on the fullest GPU that still holds it, keeping whole GPUs free; a request for
``k`` whole GPUs takes the ``k`` lowest-index fully free GPUs. Deterministic.
"""

from __future__ import annotations

import numpy as np

from scheduling.snapshot import ClusterSnapshot, Holder


def select_gpus(snapshot: ClusterSnapshot, node_index: int, job: Holder) -> tuple[int, ...] | None:
    """The GPU indices for ``job`` on node ``node_index``, or ``None`` when they do not fit."""
    k = job.num_gpu
    if k == 0:
        return ()
    row = snapshot.gpu_free[node_index]
    fits = np.flatnonzero(row >= job.per_gpu_milli)
    if len(fits) < k:
        return None
    order = np.lexsort((fits, row[fits]))  # by free share, then index
    return tuple(sorted(int(g) for g in fits[order[:k]]))
