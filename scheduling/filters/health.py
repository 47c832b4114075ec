"""Health filter: no placements on nodes marked unhealthy (isolated, failing, draining)."""

from __future__ import annotations

import numpy as np

from scheduling.filters.base import BaseFilter
from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot


class HealthFilter(BaseFilter):
    name = "health"

    def mask(self, job: JobRequest, snapshot: ClusterSnapshot) -> np.ndarray:
        return snapshot.healthy

    def reason(self, job: JobRequest) -> str:
        return "node(s) unhealthy"
