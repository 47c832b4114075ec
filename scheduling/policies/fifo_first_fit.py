"""``fifo-first-fit``: FIFO by submit time, the first feasible node in index order.

The baseline every other policy is measured against. Score ``1 − i/N`` so that the
lowest feasible index wins.
"""

from __future__ import annotations

import numpy as np

from scheduling.job import JobRequest
from scheduling.policies.base import BasePolicy
from scheduling.policies.registry import register
from scheduling.snapshot import ClusterSnapshot


@register("fifo-first-fit")
class FifoFirstFit(BasePolicy):
    name = "fifo-first-fit"

    def score(self, job: JobRequest, snapshot: ClusterSnapshot, feasible_mask: np.ndarray) -> np.ndarray:
        n = snapshot.num_nodes
        return 1.0 - np.arange(n, dtype=np.float64) / max(n, 1)
