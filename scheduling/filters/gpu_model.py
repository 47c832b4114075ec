"""GPU-model filter: a GPU job that names allowed models runs only on those models.

Jobs without GPUs, or with an empty allowed set, pass every node.
"""

from __future__ import annotations

import numpy as np

from scheduling.filters.base import BaseFilter
from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot


class GpuModelFilter(BaseFilter):
    name = "gpu_model"

    def mask(self, job: JobRequest, snapshot: ClusterSnapshot) -> np.ndarray:
        if job.num_gpu == 0 or not job.gpu_models:
            return snapshot.all_true
        return snapshot.model_mask(job.gpu_models)

    def reason(self, job: JobRequest) -> str:
        return f"GPU model not in [{', '.join(sorted(job.gpu_models))}]"
