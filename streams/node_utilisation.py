"""The nodes' measured utilisation over the current hopping window (the ``node_util`` table:
60 s windows every 30 s, fed by the agents' telemetry reports).

Read by ``GET /nodes/{node_id}/`` and, for a model whose node state has a utilisation column
(:attr:`inference.policy.LearnedPolicy.wants_utilisation`), by each scheduling step. Windows
are wall-clock here: outside a stream there is no event time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from scheduling.node import NodeView

if TYPE_CHECKING:
    from streams.app import Worker


def window_means(w: Worker, node_id: str) -> tuple[int, float | None, float | None]:
    """``(reports, GPU mean, CPU mean)`` of the window that contains now (means ``None`` without reports)."""
    sums = w.node_util[node_id].now() or [0.0, 0.0, 0]
    n = int(sums[2])
    return n, (sums[0] / n if n else None), (sums[1] / n if n else None)


def step_utilisation(w: Worker, views: Sequence[NodeView]) -> np.ndarray:
    """float32 ``[len(views)]``, 0..1: each node's window mean — its GPUs' on a GPU node, its
    CPUs' on a CPU-only one; 0 for a node with no report in the window."""
    out = np.zeros(len(views), dtype=np.float32)
    for i, v in enumerate(views):  # one table read per node; only for a model that reads the column
        _, gpu, cpu = window_means(w, v.node_id)
        mean = gpu if v.num_gpu > 0 else cpu
        out[i] = 0.0 if mean is None else min(max(mean, 0.0), 1.0)
    return out
