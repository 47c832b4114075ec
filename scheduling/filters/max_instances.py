"""Max-instances-per-node filter: at most ``max_instances_per_node`` of one app per node.

Pod anti-affinity in its simplest, most common form (1 = spread every instance). Symmetric, as
kube-scheduler's required anti-affinity is: the limit of an instance already on a node binds a
newcomer of its app too, whatever the newcomer's own (found by review: a job of limit 3 joined one
of limit 1).
"""

from __future__ import annotations

import numpy as np

from scheduling.filters.base import BaseFilter
from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot


class MaxInstancesFilter(BaseFilter):
    name = "max_instances_per_node"

    def mask(self, job: JobRequest, snapshot: ClusterSnapshot) -> np.ndarray:
        held = snapshot.instance_cap(job.app) if job.app else None
        if not job.app or (job.max_instances_per_node is None and held is None):
            return snapshot.all_true
        count = snapshot.instances(job.app)
        ok = count < job.max_instances_per_node if job.max_instances_per_node is not None else snapshot.all_true
        return ok if held is None else ok & (count < held)

    def reason(self, job: JobRequest) -> str:
        if job.max_instances_per_node is None:
            return f"node(s) already run as many instances of app {job.app} as their max_instances_per_node allows"
        return f"node(s) already run {job.max_instances_per_node} instance(s) of app {job.app}"
