"""What :mod:`inference.training.archive` replays: nodes, submissions, placed decisions with
the end of their attempt, and rejections — folded from the archive's events.

The events come from ``storage.queries.training_events`` (``ops`` reads them and passes them
in: ``inference`` holds no SQL and imports no ``storage``). :func:`fold_events` takes anything
with the four event lists of :class:`ArchivedEvents` and pairs each placed decision with
the first end of its attempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scheduling.events import DecisionRecord, JobLifecycle, JobSubmitted, NodeTelemetry
from scheduling.job import JobRequest
from scheduling.node import NodeView

ENDS = ("finished", "failed", "preempted", "timed_out")


class ArchivedEvents(Protocol):
    """The archive's events a training replay needs (``storage.queries.training_events.TrainingEvents``)."""

    nodes: Sequence[NodeTelemetry]  # each node's latest capacity, no allocation
    submissions: Sequence[JobSubmitted]  # the first per (cluster, job_id)
    placed: Sequence[DecisionRecord]  # outcome 'placed', in decision order
    ends: Sequence[JobLifecycle]  # attempt ends and rejections, in time order
    end_offsets: Sequence[int]  # each end's Kafka offset (in its cluster's partition)


@dataclass
class Placed:
    """One placed decision and how its attempt ended (``end_state`` None: still running)."""

    decision_id: str
    job_id: str
    cluster: str
    attempt: int
    node_id: str | None
    gpu_indices: tuple[int, ...]
    policy: str
    model_version: str
    fallback: bool
    step_id: str
    time: float  # epoch s
    cpu_milli: int
    memory_mib: int
    gpu_milli_per_gpu: int
    candidates: tuple[tuple[str, float], ...] = ()  # the archived top-scored nodes
    end_state: str | None = None
    end_time: float | None = None
    end_offset: int | None = None  # the end's Kafka offset in its cluster's lifecycle partition
    lifecycle_through: int | None = None  # the state its step saw: the lifecycle offsets below this applied


@dataclass
class ArchiveEvents:
    nodes: dict[str, list[NodeView]] = field(default_factory=dict)  # cluster -> nodes by node_id
    jobs: dict[tuple[str, str], JobRequest] = field(default_factory=dict)  # (cluster, job_id) -> first submission
    placed: list[Placed] = field(default_factory=list)  # by time
    rejected: dict[tuple[str, str], float] = field(default_factory=dict)  # (cluster, job_id) -> given up at


def _attempt_ends(ends: Sequence[JobLifecycle], offsets: Sequence[int], rejected: dict[tuple[str, str], float],
                  ) -> dict[tuple[str, str, int], tuple[str, float, int]]:  # fmt: skip
    """(cluster, job, attempt) -> the attempt's first end (state, time, offset); a ``finished`` with a
    non-zero exit code counts as ``failed``; a rejection ends an attempt only until a real end is seen."""
    out: dict[tuple[str, str, int], tuple[str, float, int]] = {}
    for e, offset in zip(ends, offsets, strict=True):
        t, state = e.event_time.timestamp(), e.state
        if state == "rejected":
            rejected.setdefault((e.cluster, e.job_id), t)
        if state == "finished" and e.exit_code not in (None, 0):
            state = "failed"
        key = (e.cluster, e.job_id, int(e.attempt))
        if key not in out or (out[key][0] == "rejected" and state != "rejected"):
            out[key] = (state, t, offset)  # the attempt's first end (events come in time order)
    return out


def fold_events(archived: ArchivedEvents) -> ArchiveEvents:
    """Everything the replay needs, from the archive's events (module docstring)."""
    ev = ArchiveEvents()
    for n in archived.nodes:
        ev.nodes.setdefault(n.cluster, []).append(NodeView.from_telemetry(n, with_allocation=False))
    for s in archived.submissions:
        job = JobRequest.from_event(s)
        ev.jobs.setdefault((job.cluster, job.job_id), job)
    ends = _attempt_ends(archived.ends, archived.end_offsets, ev.rejected)
    for d in archived.placed:
        end = ends.get((d.cluster, d.job_id, int(d.attempt)))
        ev.placed.append(Placed(
            decision_id=d.decision_id, job_id=d.job_id, cluster=d.cluster, attempt=int(d.attempt), node_id=d.node_id,
            gpu_indices=tuple(int(g) for g in d.gpu_indices), policy=d.policy, model_version=d.model_version or "",
            fallback=bool(d.fallback), step_id=d.step_id or "", time=d.event_time.timestamp(), cpu_milli=d.cpu_milli,
            memory_mib=d.memory_mib, gpu_milli_per_gpu=d.gpu_milli_per_gpu,
            candidates=tuple((c.node_id, float(c.score)) for c in d.candidates),
            end_state=end[0] if end else None, end_time=end[1] if end else None,
            end_offset=end[2] if end else None, lifecycle_through=d.lifecycle_through))  # fmt: skip
    return ev
