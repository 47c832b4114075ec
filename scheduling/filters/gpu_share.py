"""GPU-share filter: the per-GPU share must fit on individual physical GPUs.

A fractional request (``per_gpu_milli < 1000``) needs ONE GPU with that much free —
two GPUs with 600 free each cannot take a 700 request. A request for ``k`` whole GPUs
needs ``k`` fully free GPUs.
"""

from __future__ import annotations

import numpy as np

from scheduling.filters.base import BaseFilter
from scheduling.job import JobRequest
from scheduling.resources import FULL_GPU_MILLI
from scheduling.snapshot import ClusterSnapshot


class GpuShareFilter(BaseFilter):
    name = "gpu_share"

    def mask(self, job: JobRequest, snapshot: ClusterSnapshot) -> np.ndarray:
        if job.num_gpu == 0:
            return snapshot.all_true
        if job.num_gpu == 1:
            return snapshot.gpu_max_free >= job.per_gpu_milli
        return snapshot.gpu_full_free >= job.num_gpu  # (a share of several GPUs is refused: JobRequest)

    def reason(self, job: JobRequest) -> str:
        if job.per_gpu_milli < FULL_GPU_MILLI:
            return f"no single GPU with {job.per_gpu_milli}m free"
        return f"fewer than {job.num_gpu} fully free GPU(s)"
