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
from scheduling.simulator.workload import SimJob

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
    start = np.array([j.request.submit_time for j in jobs])
    return _peak(start, _durations(jobs), _demands(jobs, resource), _capacity(nodes, resource), windows)


def _durations(jobs: Sequence[SimJob]) -> np.ndarray:
    return np.array([j.duration_s for j in jobs])


def _demands(jobs: Sequence[SimJob], resource: str) -> np.ndarray:
    return np.array([j.request.gpu_demand_milli if resource == "gpu" else j.request.cpu_milli for j in jobs],
                    dtype=np.float64)  # fmt: skip


def _peak(start: np.ndarray, duration: np.ndarray, demand: np.ndarray, cap: float, windows: int) -> float:
    """:func:`offered_peak` of jobs given as arrays (in any order)."""
    if cap <= 0:
        return 0.0
    end = start + duration
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


class _Scaled:
    """What :func:`offered_peak` reads of ``jobs`` under every scaling :func:`plan_load` tries, as
    arrays: the submit times :func:`~scheduling.simulator.workload.scale_jobs` computes, with the
    same float operations, without building the jobs (the bisection tries ~40 scalings per
    replica count; building them took a minute on Google 2011). ``scale_jobs`` also sorts its
    jobs; :func:`_peak` sorts the events by time itself, and the order of events at one time
    does not change the sums: demands are whole milli-units, so they add up exactly in any order."""

    def __init__(self, jobs: Sequence[SimJob], resource: str) -> None:
        self.submit = np.array([j.request.submit_time for j in jobs])
        self.duration, self.demand = _durations(jobs), _demands(jobs, resource)

    def peak(self, factor: float, copies: int, cap: float, windows: int) -> float:
        """``offered_peak(nodes, scale_jobs(jobs, factor, copies), windows)``, to the last bit."""
        if factor == 1.0 and copies == 1:  # scale_jobs returns the jobs as they are
            return _peak(self.submit, self.duration, self.demand, cap, windows)
        t0 = float(self.submit[0])
        gap = (float(self.submit[-1]) - t0) / factor / max(len(self.submit) - 1, 1)
        base = t0 + (self.submit - t0) / factor
        submit = np.concatenate([base + k * gap / copies for k in range(copies)])
        return _peak(submit, np.tile(self.duration, copies), np.tile(self.demand, copies), cap, windows)


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
    resource = dominant_resource(jobs)
    cap = _capacity(nodes, resource)
    scaled = _Scaled(jobs, resource)
    best: LoadPlan | None = None
    for copies in range(1, max_copies + 1):
        lo, hi = -3.0, top
        for _ in range(40):
            mid = (lo + hi) / 2
            if scaled.peak(10**mid, copies, cap, windows) < target_peak:
                lo = mid
            else:
                hi = mid
        factor = float(10**hi)
        plan = LoadPlan(factor, copies, scaled.peak(factor, copies, cap, windows))
        if best is None or abs(plan.offered_peak - target_peak) < abs(best.offered_peak - target_peak):
            best = plan
        if abs(plan.offered_peak - target_peak) <= 0.03 * target_peak:
            return plan
    assert best is not None
    return best
