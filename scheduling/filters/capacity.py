"""Capacity filter: enough free cpu, memory and GPU on the node in aggregate.

GPU here is the node's total: it has at least ``num_gpu`` GPUs and at least
``num_gpu × per_gpu_milli`` free milli-GPU summed over them. Whether the share fits on
individual GPUs is :mod:`scheduling.filters.gpu_share`'s job.
"""

from __future__ import annotations

import numpy as np

from scheduling.filters.base import BaseFilter
from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot


def _gpu_ok(job: JobRequest, snapshot: ClusterSnapshot) -> np.ndarray:
    return (snapshot.num_gpu >= job.num_gpu) & (snapshot.gpu_free_milli >= job.gpu_demand_milli)


class CapacityFilter(BaseFilter):
    name = "capacity"

    def mask(self, job: JobRequest, snapshot: ClusterSnapshot) -> np.ndarray:
        ok = (snapshot.cpu_free >= job.cpu_milli) & (snapshot.mem_free >= job.memory_mib)
        if job.num_gpu:
            ok &= _gpu_ok(job, snapshot)
        return ok

    def reason(self, job: JobRequest) -> str:
        return "insufficient resources"

    def explain(self, job: JobRequest, snapshot: ClusterSnapshot, rejected: np.ndarray) -> list[tuple[str, int]]:
        """Each rejected node is charged to the first short resource: GPU, then cpu, then memory."""
        left = rejected.copy()
        out: list[tuple[str, int]] = []
        checks = [
            ("insufficient GPU", _gpu_ok(job, snapshot) if job.num_gpu else snapshot.all_true),
            ("insufficient cpu", snapshot.cpu_free >= job.cpu_milli),
            ("insufficient memory", snapshot.mem_free >= job.memory_mib),
        ]
        for text, ok in checks:
            hit = left & ~ok
            count = int(np.count_nonzero(hit))
            if count:
                out.append((text, count))
                left &= ok
        return out
