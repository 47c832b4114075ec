"""What a simulated run produced, and its metrics through :mod:`scheduling.metrics`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scheduling.metrics import (
    Distribution,
    Holding,
    JobMetrics,
    JobOutcome,
    allocation_over_time,
    job_metrics,
    order_agreement,
    placement_stability,
)
from scheduling.simulator.config import SimConfig


@dataclass(frozen=True, slots=True)
class StepRecord:
    time: float
    pending: int  # eligible jobs the step considered
    placed: int
    compute_ms: float
    left: int = 0  # jobs still pending after the step (preemption may re-queue some)


@dataclass
class SimResult:
    policy: str
    config: SimConfig
    outcomes: list[JobOutcome]
    steps: list[StepRecord]
    holdings: list[Holding]  # GPU holdings, for allocation over time
    gpu_capacity_milli: int
    rejected_reasons: dict[str, int] = field(default_factory=dict)
    orders: list[list[str]] = field(default_factory=list)
    reversals: int = 0
    fragmentation: list[tuple[float, float, float]] = field(default_factory=list)  # (time, rate, partial ratio)
    wall_s: float = 0.0
    end_time: float = 0.0

    @property
    def metrics(self) -> JobMetrics:
        return job_metrics(self.outcomes)

    @property
    def step_compute_ms(self) -> Distribution:
        return Distribution.of(s.compute_ms for s in self.steps)

    def gpu_allocation(self, windows: int = 100) -> tuple[np.ndarray, np.ndarray]:
        """``(window start, allocated share of GPU capacity)`` over the arrival span (first
        to last submission, as the offered load in :mod:`scheduling.simulator.load`), in
        ``windows`` equal windows; the drain after the last arrival is left out."""
        if not self.holdings or not self.gpu_capacity_milli or not self.outcomes:
            return np.zeros(0), np.zeros(0)
        lo = min(o.submit for o in self.outcomes)
        hi = max(o.submit for o in self.outcomes)
        if hi <= lo:
            hi = self.end_time
        bucket = max((hi - lo) / windows, 1e-9)
        held = [h for h in self.holdings if h.start < hi]
        if not held:
            return np.zeros(0), np.zeros(0)
        # from the first submission: the time before the first GPU job counts (found by review: a run
        # whose GPU work began late in the span reported only the busy end of it)
        samples = allocation_over_time(held, self.gpu_capacity_milli, bucket_s=bucket, end=hi, start=lo)
        return np.array([s.bucket_start for s in samples]), np.array([s.ratio for s in samples])

    def queue_length(self) -> tuple[np.ndarray, np.ndarray]:
        """``(step time, pending jobs left after the step)``."""
        return (np.array([s.time for s in self.steps]),
                np.array([s.left for s in self.steps]))  # fmt: skip

    def summary(self) -> dict[str, float | int | str | None]:
        """One row for a report table: job metrics, GPU allocation, latency, stability."""
        m = self.metrics
        _, alloc = self.gpu_allocation()
        placements = sum(o.placements for o in self.outcomes)
        return {
            "policy": self.policy,
            **m.as_row(),
            "gpu_alloc_mean": float(alloc.mean()) if alloc.size else None,
            "gpu_alloc_peak": float(alloc.max()) if alloc.size else None,
            # (a mean over the steps that sampled it, not over time: steps run while jobs are pending)
            "gpu_frag_rate_mean": float(np.mean([f[1] for f in self.fragmentation])) if self.fragmentation else None,
            "gpu_partial_ratio_mean": float(np.mean([f[2] for f in self.fragmentation])) if self.fragmentation else None,
            "steps": len(self.steps),
            **self.step_compute_ms.as_dict("step_ms_"),
            "placement_stability": placement_stability(placements, self.reversals),
            "order_agreement": order_agreement(self.orders),
            "wall_s": self.wall_s,
        }
