"""Max-instances-per-node filter: at most ``max_instances_per_node`` of one app per node.

Pod anti-affinity in its simplest, most common form (1 = spread every instance).
"""

from __future__ import annotations

import numpy as np

from scheduling.filters.base import BaseFilter
from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot


class MaxInstancesFilter(BaseFilter):
    name = "max_instances_per_node"

    def mask(self, job: JobRequest, snapshot: ClusterSnapshot) -> np.ndarray:
        if not job.app or job.max_instances_per_node is None:
            return snapshot.all_true
        return snapshot.instances(job.app) < job.max_instances_per_node

    def reason(self, job: JobRequest) -> str:
        return f"node(s) already run {job.max_instances_per_node} instance(s) of app {job.app}"
