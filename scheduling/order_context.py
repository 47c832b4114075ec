"""``OrderContext``: what an ordering may know beyond the pending jobs themselves.

The caller of :func:`scheduling.assign.schedule_step` (the Faust worker's loop, the
offline simulator) builds it from its state; every field is optional so a plain FIFO or
SJF-oracle ordering needs none of it.

- ``tenant_held``: resources each tenant's running jobs hold, as ``(cpu_milli,
  memory_mib, gpu_milli)`` — DRF's dominant shares divide it by ``capacity``.
- ``capacity``: the cluster's total ``(cpu_milli, memory_mib, gpu_milli)``.
- ``attained_service``: GPU-seconds (CPU-seconds for CPU-only jobs) a job has already
  received in earlier attempts — Tiresias' 2D-LAS attained service.
- ``estimator``: a duration predictor for SJF with predicted durations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from scheduling.job import JobRequest


class DurationPredictor(Protocol):
    def predict(self, job: JobRequest) -> float | None:
        """Predicted run time in seconds, or ``None`` when it has no idea."""
        ...


@dataclass(frozen=True)
class OrderContext:
    tenant_held: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)
    capacity: tuple[float, float, float] = (0.0, 0.0, 0.0)
    attained_service: Mapping[str, float] = field(default_factory=dict)
    estimator: DurationPredictor | None = None


EMPTY_CONTEXT = OrderContext()
