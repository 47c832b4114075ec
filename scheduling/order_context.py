"""``OrderContext``: what an ordering may know beyond the pending jobs themselves.

The caller of :func:`scheduling.assign.schedule_step` (the Faust worker's loop, the
offline simulator) builds it from its state; every field is optional so a plain FIFO or
SJF-oracle ordering needs none of it.

- ``tenant_held``: resources each tenant's *running* jobs hold right now, as
  ``(cpu_milli, memory_mib, gpu_milli)`` (:func:`tenant_usage` sums them) — DRF's
  dominant shares divide it by ``capacity``.
- ``capacity``: the cluster's total ``(cpu_milli, memory_mib, gpu_milli)``
  (:func:`cluster_capacity` of a snapshot).
- ``attained_service``: job id → service the job has already received in earlier
  attempts (a job preempted and re-queued), in :func:`service_rate` units × seconds:
  GPU-seconds for GPU jobs, core-seconds for CPU-only jobs — Tiresias' 2D-LAS attained
  service. A job that never ran is simply absent (0).
- ``queued_since``: job id → when the job last became pending (its submit time, or the
  time it was preempted / re-queued); absent → ``job.submit_time``. LAS' starvation guard
  compares this wait with the job's executed time.
- ``estimator``: a duration predictor for SJF with predicted durations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot

Triple = tuple[float, float, float]


class DurationPredictor(Protocol):
    def predict(self, job: JobRequest) -> float | None:
        """Predicted run time in seconds, or ``None`` when it has no idea."""
        ...


class LearningDurationPredictor(DurationPredictor, Protocol):
    """A predictor that learns online: the simulator / worker calls :meth:`observe` when a
    job *finishes* successfully, with its run time (finish − start of the final attempt)."""

    def observe(self, job: JobRequest, duration_s: float) -> None: ...


@dataclass(frozen=True)
class OrderContext:
    tenant_held: Mapping[str, Triple] = field(default_factory=dict)
    capacity: Triple = (0.0, 0.0, 0.0)
    attained_service: Mapping[str, float] = field(default_factory=dict)
    estimator: DurationPredictor | None = None
    queued_since: Mapping[str, float] = field(default_factory=dict)


EMPTY_CONTEXT = OrderContext()


def service_rate(job: JobRequest) -> float:
    """Service a job receives per second of running: its GPUs (``num_gpu × per_gpu_milli
    / 1000``, so a 0.5-GPU share counts half) or, for a CPU-only job, its cores
    (``cpu_milli / 1000``). Attained service = rate × executed seconds."""
    if job.num_gpu > 0:
        return job.gpu_demand_milli / 1000.0
    return job.cpu_milli / 1000.0


def demand(job: JobRequest) -> Triple:
    """``(cpu_milli, memory_mib, gpu_milli)`` a job holds while it runs."""
    return (float(job.cpu_milli), float(job.memory_mib), float(job.gpu_demand_milli))


def tenant_usage(running: Iterable[JobRequest]) -> dict[str, Triple]:
    """Per tenant, the summed :func:`demand` of its running jobs (``tenant_held``)."""
    held: dict[str, list[float]] = {}
    for job in running:
        acc = held.setdefault(job.tenant, [0.0, 0.0, 0.0])
        cpu, mem, gpu = demand(job)
        acc[0] += cpu
        acc[1] += mem
        acc[2] += gpu
    return {tenant: (a[0], a[1], a[2]) for tenant, a in held.items()}


class TenantUsage(Mapping[str, Triple]):
    """:func:`tenant_usage` of ``running()``, summed only when an ordering first reads it (most
    orderings never do, and the worker's running jobs are thousands)."""

    def __init__(self, running: Callable[[], Iterable[JobRequest]]) -> None:
        self._running: Callable[[], Iterable[JobRequest]] | None = running
        self._held: dict[str, Triple] = {}

    def _usage(self) -> dict[str, Triple]:
        if self._running is not None:
            self._held, self._running = tenant_usage(self._running()), None
        return self._held

    def __getitem__(self, tenant: str) -> Triple:
        return self._usage()[tenant]

    def __iter__(self) -> Iterator[str]:
        return iter(self._usage())

    def __len__(self) -> int:
        return len(self._usage())


def cluster_capacity(snapshot: ClusterSnapshot) -> Triple:
    """The snapshot's total ``(cpu_milli, memory_mib, gpu_milli)`` over all nodes."""
    return (float(snapshot.cpu_cap.sum()), float(snapshot.mem_cap.sum()), float(snapshot.gpu_cap_milli.sum()))
