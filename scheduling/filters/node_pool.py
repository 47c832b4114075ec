"""Node-pool filter: a job labelled with a pool runs only on the nodes of that pool.

kube-scheduler's ``nodeSelector`` in its simplest form, on one label: a submission's
``labels["pool"]`` must equal the node's ``topology["pool"]`` (:data:`scheduling.job.POOL_LABEL`).
A job without the label passes every node. The DLRM 2025 trace's two pools (CPU nodes, GPU
nodes: ``ops/traces/dlrm_inventory.py``) are kept apart this way (found by review: its CPU
instances filled the GPU nodes' CPUs).
"""

from __future__ import annotations

import numpy as np

from scheduling.filters.base import BaseFilter
from scheduling.job import POOL_LABEL, JobRequest
from scheduling.snapshot import ClusterSnapshot


class NodePoolFilter(BaseFilter):
    name = "node_pool"

    def mask(self, job: JobRequest, snapshot: ClusterSnapshot) -> np.ndarray:
        if job.node_pool is None:
            return snapshot.all_true
        pool = job.node_pool
        return snapshot.static_cache(("node-pool", pool), lambda s: s.topology_values(POOL_LABEL, "") == pool)

    def reason(self, job: JobRequest) -> str:
        return f"node(s) not in pool {job.node_pool}"
