"""Cluster filter: a job runs only on nodes of its own cluster."""

from __future__ import annotations

import numpy as np

from scheduling.filters.base import BaseFilter
from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot


class ClusterFilter(BaseFilter):
    name = "cluster"

    def mask(self, job: JobRequest, snapshot: ClusterSnapshot) -> np.ndarray:
        return snapshot.cluster_mask(job.cluster)

    def reason(self, job: JobRequest) -> str:
        return f"node(s) not in cluster {job.cluster}"
