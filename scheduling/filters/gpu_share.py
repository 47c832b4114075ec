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
        if job.per_gpu_milli >= FULL_GPU_MILLI:
            return snapshot.gpu_full_free >= job.num_gpu
        fitting = np.count_nonzero(snapshot.gpu_free >= job.per_gpu_milli, axis=1)  # k shared GPUs: rare
        return fitting >= job.num_gpu

    def reason(self, job: JobRequest) -> str:
        if job.per_gpu_milli < FULL_GPU_MILLI:
            if job.num_gpu == 1:
                return f"no single GPU with {job.per_gpu_milli}m free"
            return f"fewer than {job.num_gpu} GPUs with {job.per_gpu_milli}m free each"
        return f"fewer than {job.num_gpu} fully free GPU(s)"
