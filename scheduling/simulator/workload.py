"""The simulator's input, built from the canonical events the trace loaders yield.

A ``SimJob`` is the :class:`~scheduling.job.JobRequest` the worker would build from the
submission, its run time on a speed-1 node (``trace_duration_s``) and its DAG parents.
A submission without a run time (never ran in the original trace, or ran past the trace
window) cannot be replayed with departures: it is left out and counted under
``skipped``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from scheduling.events import JobSubmitted, NodeTelemetry
from scheduling.job import JobRequest
from scheduling.node import NodeView


@dataclass(frozen=True, slots=True)
class SimJob:
    request: JobRequest  # submit_time = offset in seconds from the trace start
    duration_s: float
    parents: tuple[str, ...] = ()

    @property
    def job_id(self) -> str:
        return self.request.job_id


@dataclass
class Workload:
    nodes: list[NodeView]
    jobs: list[SimJob]  # sorted by submit time, then job id
    skipped: dict[str, int] = field(default_factory=dict)
    # what the trace's loader counted as special cases on the way (``LoadStats.notes``: tasks already running,
    # resubmissions ignored …), for a report to say beside ``skipped``
    notes: dict[str, int] = field(default_factory=dict)

    def scaled(self, load_factor: float, copies: int = 1) -> list[SimJob]:
        """The jobs with arrival rate × ``load_factor × copies``: submit offsets (from the
        first) divided by ``load_factor``, and ``copies`` superposed replicas of the trace
        (ids suffixed ``#k``; replica ``k`` shifted by ``k / copies`` of the mean
        inter-arrival time, so arrivals interleave). Replicas reach loads that
        compression alone cannot: a trace whose whole demand fits the cluster at once."""
        return scale_jobs(self.jobs, load_factor, copies)


def scale_jobs(jobs: list[SimJob], load_factor: float, copies: int = 1) -> list[SimJob]:
    """See :meth:`Workload.scaled`."""
    if not jobs or (load_factor == 1.0 and copies == 1):
        return list(jobs)
    if copies < 1:
        raise ValueError("copies must be >= 1")
    t0 = jobs[0].request.submit_time
    span = (jobs[-1].request.submit_time - t0) / load_factor
    gap = span / max(len(jobs) - 1, 1)
    out: list[SimJob] = []
    for k in range(copies):
        shift = k * gap / copies
        for j in jobs:
            submit = t0 + (j.request.submit_time - t0) / load_factor + shift
            job_id = j.job_id if k == 0 else f"{j.job_id}#{k}"
            parents = j.parents if k == 0 else tuple(f"{p}#{k}" for p in j.parents)
            out.append(replace(j, request=replace(j.request, job_id=job_id, submit_time=submit), parents=parents))
    out.sort(key=lambda j: (j.request.submit_time, j.job_id))
    return out


def build_workload(nodes: Iterable[NodeTelemetry], jobs: Iterable[tuple[float, JobSubmitted]]) -> Workload:
    """Nodes (empty) and jobs from ``(offset_s, submission)`` pairs. Left out (counted in ``skipped``): a
    job without a run time, and every member of a gang with fewer members loaded than its size."""
    node_views = [NodeView.from_telemetry(t, with_allocation=False) for t in nodes]
    out: list[SimJob] = []
    skipped: dict[str, int] = {}
    for offset, event in jobs:
        if event.trace_duration_s is None:
            skipped["no_duration"] = skipped.get("no_duration", 0) + 1
            continue
        request = JobRequest.from_event(event, submit_time=offset)
        out.append(SimJob(request, float(event.trace_duration_s), tuple(event.dag_parents)))
    # a gang short of members (one left out above, or cut off by a loader's --limit) would wait for
    # ever, and a replay's means would leave it out without a word (found by review): left out whole
    size: dict[str, int] = {}
    for j in out:
        if j.request.is_gang:
            size[j.request.gang_id] = max(size.get(j.request.gang_id, 0), j.request.gang_size)  # type: ignore[index]
    loaded = Counter(j.request.gang_id for j in out if j.request.gang_id in size)
    short = {g for g, n in size.items() if loaded[g] < n}
    if short:
        skipped["incomplete_gang"] = sum(loaded[g] for g in short)
        out = [j for j in out if j.request.gang_id not in short]
    out.sort(key=lambda j: (j.request.submit_time, j.job_id))
    return Workload(node_views, out, skipped)
