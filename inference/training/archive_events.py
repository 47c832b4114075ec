"""What :mod:`inference.training.archive` replays: nodes, submissions, placed decisions with
the end of their attempt, and rejections — folded from the archive's events.

The events come from ``storage.queries.training_events`` (``ops`` reads them and passes them
in: ``inference`` holds no SQL and imports no ``storage``). :func:`fold_events` takes anything
with the event lists of :class:`ArchivedEvents` and pairs each placed decision with the end of
its attempt that the worker applied (the first in the topic) and when the attempt started.
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
    placed_partitions: Sequence[int]  # each decision's Kafka partition (its cluster's)
    ends: Sequence[JobLifecycle]  # attempt starts, ends and rejections, in the topic's order
    end_positions: Sequence[tuple[int, int]]  # each one's Kafka (partition, offset)


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
    end_position: tuple[int, int] | None = None  # the end's Kafka (partition, offset) in jobs.lifecycle
    started_time: float | None = None  # the attempt's first ``started`` (the agent's clock, as its end)
    partition: int = 0  # the decision's Kafka partition (its cluster's, in every topic)
    lifecycle_through: int | None = None  # the state its step saw: the partition's reports below this handled
    feasible_nodes: int = 0  # how many nodes the worker found feasible for it (0: not recorded)


@dataclass
class ArchiveEvents:
    nodes: dict[str, list[NodeView]] = field(default_factory=dict)  # cluster -> nodes by node_id
    jobs: dict[tuple[str, str], JobRequest] = field(default_factory=dict)  # (cluster, job_id) -> first submission
    placed: list[Placed] = field(default_factory=list)  # by time
    rejected: dict[tuple[str, str], float] = field(default_factory=dict)  # (cluster, job_id) -> given up at


Key = tuple[str, str, int]  # (cluster, job id, attempt)
End = tuple[str, float, tuple[int, int]]  # (state, event time, Kafka position)


def _attempt_ends(reports: Sequence[JobLifecycle], positions: Sequence[tuple[int, int]],
                  rejected: dict[tuple[str, str], float]) -> tuple[dict[Key, End], dict[Key, float]]:  # fmt: skip
    """Each attempt's end as the worker applies it, and its first ``started`` time, from ``reports`` in
    the topic's order (``streams/state.py``): the first end in the topic; a ``finished`` with a non-zero
    exit code counts as ``failed``; a ``timed_out`` after the attempt's ``started`` is none (the worker
    keeps the run), nor an end from another node than the one it started on (a second execution's);
    a rejection ends an attempt only until a real end is seen. Not modelled: a ``finished`` of the
    attempt before, which the worker takes for the job's end while the next one waits to start."""
    out: dict[Key, End] = {}
    started: dict[Key, tuple[float, str | None]] = {}  # the first start: when, on which node
    for e, position in zip(reports, positions, strict=True):
        t, state, key = e.event_time.timestamp(), e.state, (e.cluster, e.job_id, int(e.attempt))
        if state == "started":
            started.setdefault(key, (t, e.node_id))
            continue
        if state == "rejected":
            rejected.setdefault((e.cluster, e.job_id), t)
        if key in started and (state == "timed_out" or (e.node_id and started[key][1] and e.node_id != started[key][1])):
            continue
        if state == "finished" and e.exit_code not in (None, 0):
            state = "failed"
        if key not in out or (out[key][0] == "rejected" and state != "rejected"):
            out[key] = (state, t, position)
    return out, {k: t for k, (t, _) in started.items()}


def fold_events(archived: ArchivedEvents) -> ArchiveEvents:
    """Everything the replay needs, from the archive's events (module docstring)."""
    ev = ArchiveEvents()
    for n in archived.nodes:
        ev.nodes.setdefault(n.cluster, []).append(NodeView.from_telemetry(n, with_allocation=False))
    for s in archived.submissions:
        job = JobRequest.from_event(s)
        ev.jobs.setdefault((job.cluster, job.job_id), job)
    ends, started = _attempt_ends(archived.ends, archived.end_positions, ev.rejected)
    for d, partition in zip(archived.placed, archived.placed_partitions, strict=True):
        key = (d.cluster, d.job_id, int(d.attempt))
        end = ends.get(key)
        ev.placed.append(Placed(
            decision_id=d.decision_id, job_id=d.job_id, cluster=d.cluster, attempt=int(d.attempt), node_id=d.node_id,
            gpu_indices=tuple(int(g) for g in d.gpu_indices), policy=d.policy, model_version=d.model_version or "",
            fallback=bool(d.fallback), step_id=d.step_id or "", time=d.event_time.timestamp(), cpu_milli=d.cpu_milli,
            memory_mib=d.memory_mib, gpu_milli_per_gpu=d.gpu_milli_per_gpu,
            candidates=tuple((c.node_id, float(c.score)) for c in d.candidates),
            end_state=end[0] if end else None, end_time=end[1] if end else None,
            end_position=end[2] if end else None, started_time=started.get(key), partition=partition,
            lifecycle_through=d.lifecycle_through, feasible_nodes=int(d.feasible_nodes or 0)))  # fmt: skip
    return ev
