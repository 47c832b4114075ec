"""Offered load: how busy the cluster would be if every job started on arrival.

The sweep's load levels are bands of *peak* cluster utilisation (the seed paper's): Low
≤ 50 %, Medium 50–75 %, High 75–95 %, Extreme > 95 %. The offered peak is the largest
time-weighted mean of the offered demand over ``windows`` equal windows of the *arrival
span* (first to last submission, after scaling: the drain after the last arrival is not
load), on the dominant resource (GPU milli when jobs ask for GPUs, else CPU milli),
divided by the cluster's capacity of it. :func:`plan_load` finds the arrival-rate
scaling (compression, then superposed replicas when compression alone saturates) whose
offered peak hits a level's target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scheduling.node import NodeView
from scheduling.simulator.workload import SimJob, scale_jobs

# level -> target offered peak (inside the band; Extreme oversubscribes)
LOAD_LEVELS: dict[str, float] = {"low": 0.40, "medium": 0.62, "high": 0.85, "extreme": 1.20}


def dominant_resource(jobs: Sequence[SimJob]) -> str:
    return "gpu" if any(j.request.num_gpu for j in jobs) else "cpu"


def _capacity(nodes: Sequence[NodeView], resource: str) -> float:
    if resource == "gpu":
        return float(sum(n.num_gpu for n in nodes) * 1000)
    return float(sum(n.cpu_milli for n in nodes))


def offered_peak(nodes: Sequence[NodeView], jobs: Sequence[SimJob], windows: int = 100) -> float:
    """Peak offered utilisation (0..∞) of ``jobs`` as given (already scaled)."""
    if not jobs:
        return 0.0
    resource = dominant_resource(jobs)
    cap = _capacity(nodes, resource)
    if cap <= 0:
        return 0.0
    start = np.array([j.request.submit_time for j in jobs])
    end = start + np.array([j.duration_s for j in jobs])
    demand = np.array([j.request.gpu_demand_milli if resource == "gpu" else j.request.cpu_milli for j in jobs],
                      dtype=np.float64)  # fmt: skip
    times = np.concatenate([start, end])
    deltas = np.concatenate([demand, -demand])
    order = np.argsort(times, kind="stable")
    times, level = times[order], np.cumsum(deltas[order])
    lo, hi = float(start.min()), float(start.max())
    if hi - lo <= 0:  # everything arrives at once: the level right after the arrivals
        return float(level[np.searchsorted(times, lo, side="right") - 1] / cap)
    integral = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(times))])
    edges = np.linspace(lo, hi, windows + 1)
    at = np.interp(edges, times, integral)
    return float((np.diff(at) / np.diff(edges)).max() / cap)


@dataclass(frozen=True)
class LoadPlan:
    factor: float  # arrival-time compression
    copies: int  # superposed replicas
    offered_peak: float

    @property
    def rate_multiplier(self) -> float:
        return self.factor * self.copies


def plan_load(nodes: Sequence[NodeView], jobs: Sequence[SimJob], target_peak: float, *,
              max_copies: int = 8, windows: int = 100) -> LoadPlan:  # fmt: skip
    """The scaling whose offered peak is closest to ``target_peak``: bisection on
    log(factor) with one copy, more copies only if that falls short. The compression is
    capped where the arrival span would shrink below the median run time — beyond that
    the trace arrives "at once" and only replicas add load."""
    jobs = list(jobs)
    if not jobs:
        return LoadPlan(1.0, 1, 0.0)
    span = jobs[-1].request.submit_time - jobs[0].request.submit_time
    median = float(np.median([j.duration_s for j in jobs]))
    top = float(np.log10(max(span / median, 1.0))) if median > 0 else 5.0
    best: LoadPlan | None = None
    for copies in range(1, max_copies + 1):
        lo, hi = -3.0, top
        for _ in range(40):
            mid = (lo + hi) / 2
            if offered_peak(nodes, scale_jobs(jobs, 10**mid, copies), windows) < target_peak:
                lo = mid
            else:
                hi = mid
        factor = float(10**hi)
        plan = LoadPlan(factor, copies, offered_peak(nodes, scale_jobs(jobs, factor, copies), windows))
        if best is None or abs(plan.offered_peak - target_peak) < abs(best.offered_peak - target_peak):
            best = plan
        if abs(plan.offered_peak - target_peak) <= 0.03 * target_peak:
            return plan
    assert best is not None
    return best
