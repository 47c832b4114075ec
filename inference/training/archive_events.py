"""What :mod:`inference.training.archive` replays: nodes, submissions, placed decisions with
the end of their attempt, and rejections — folded from the archive's events.

The events come from ``storage.queries.training_events`` (``ops`` reads them and passes them
in: ``inference`` holds no SQL and imports no ``storage``). :func:`fold_events` takes anything
with the event lists of :class:`ArchivedEvents` and pairs each placed decision with the end of
its attempt that the worker applied (the first in the topic) and when the attempt started.

**A job id used again.** Once a finished job is forgotten (``SEMSCHED_DONE_RETENTION``) its id may
name a new job, whose decisions have ids of their own (:func:`~scheduling.events.decision_id_for`
hashes the submission's event id in). Each decision is tied to the submission its id names; a later
submission a decision names is another job (an *incarnation*): it, its decisions and their reports
go under ``<job id>~<n>`` (n = 2, 3, …), so the replay never gives a later job the first one's demand
or end (found by review: they were joined on the job id and attempt alone). Reports are tied to a
decision by their ``decision_id``, a rejection to the latest submission before it. A decision id
that names no archived submission (ids before 2026-12-04 did not) stays with the first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scheduling.events import DecisionRecord, JobLifecycle, JobSubmitted, NodeTelemetry, decision_id_for
from scheduling.job import JobRequest
from scheduling.node import NodeView

ENDS = ("finished", "failed", "preempted", "timed_out")


class ArchivedEvents(Protocol):
    """The archive's events a training replay needs (``storage.queries.training_events.TrainingEvents``)."""

    nodes: Sequence[NodeTelemetry]  # each node's latest capacity, no allocation
    submissions: Sequence[JobSubmitted]  # every accepted one, by (cluster, job_id), then time
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
    started_node: str | None = None  # the node that first ``started`` it (another than node_id: not this decision's run)
    partition: int = 0  # the decision's Kafka partition (its cluster's, in every topic)
    lifecycle_through: int | None = None  # the state its step saw: the partition's reports below this handled
    feasible_nodes: int = 0  # how many nodes the worker found feasible for it (0: not recorded)


@dataclass
class ArchiveEvents:
    nodes: dict[str, list[NodeView]] = field(default_factory=dict)  # cluster -> nodes by node_id
    jobs: dict[tuple[str, str], JobRequest] = field(default_factory=dict)  # (cluster, job_id) -> its submission
    placed: list[Placed] = field(default_factory=list)  # by time
    rejected: dict[tuple[str, str], float] = field(default_factory=dict)  # (cluster, job_id) -> given up at


Key = tuple[str, str, int]  # (cluster, job id, attempt)
End = tuple[str, float, tuple[int, int]]  # (state, event time, Kafka position)


def _attempt_ends(reports: Sequence[JobLifecycle], positions: Sequence[tuple[int, int]],
                  rejected: dict[tuple[str, str], float]) -> tuple[dict[Key, End], dict[Key, tuple[float, str | None]]]:  # fmt: skip
    """Each attempt's end as the worker applies it, and its first ``started`` (time, node), from ``reports`` in
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
    return out, started


def _incarnations(archived: ArchivedEvents) -> tuple[list[JobSubmitted], list[DecisionRecord], list[JobLifecycle]]:
    """The submissions (the first of each job), decisions and reports with a later job under a used id
    renamed ``<job id>~<n>`` (module docstring)."""
    subs: dict[tuple[str, str], list[JobSubmitted]] = {}
    for s in archived.submissions:
        subs.setdefault((s.cluster, s.job_id), []).append(s)
    named: dict[tuple[str, str], list[JobSubmitted]] = {}  # each job id's submissions some decision names, by time
    of_decision: dict[tuple[str, str], JobSubmitted] = {}  # (cluster, decision id): ids are a cluster's
    for d in archived.placed:
        mine = subs.get((d.cluster, d.job_id), [])
        if len(mine) < 2:
            continue
        s = next((s for s in mine if decision_id_for(d.job_id, int(d.attempt), s.event_id) == d.decision_id), None)
        if s is not None:
            of_decision[(d.cluster, d.decision_id)] = s
            if s not in (got := named.setdefault((d.cluster, d.job_id), [])):
                got.append(s)
    key_of: dict[str, str] = {}  # a named submission's event id -> its job's key
    later: list[JobSubmitted] = []  # the submissions of the later jobs, renamed
    for (_, job_id), named_subs in named.items():
        named_subs.sort(key=lambda s: s.event_time)
        for n, s in enumerate(named_subs):
            key_of[s.event_id] = job_id if n == 0 else f"{job_id}~{n + 1}"
            if n:
                later.append(s.model_copy(update={"job_id": key_of[s.event_id]}))
    # each job id's first job: the first submission a decision names (an earlier one no decision names, a job
    # rejected or resent, is not the placed job's demand), else the first
    firsts = [named[key][0] if key in named else mine[0] for key, mine in subs.items()]
    if not later:  # no id used again: as they are
        return firsts, list(archived.placed), list(archived.ends)

    def key_at(cluster: str, job_id: str, t: float) -> str:
        """The job under ``job_id`` submitted last at or before ``t`` (the first one if none)."""
        starts = [s for s in named.get((cluster, job_id), []) if s.event_time.timestamp() <= t]
        return key_of[max(starts, key=lambda s: s.event_time).event_id] if starts else job_id

    placed, decision_key = [], {}
    for d in archived.placed:
        s = of_decision.get((d.cluster, d.decision_id))
        key = key_of[s.event_id] if s is not None else d.job_id
        decision_key[(d.cluster, d.decision_id)] = key
        placed.append(d if key == d.job_id else d.model_copy(update={"job_id": key}))
    ends = []
    for e in archived.ends:
        key = decision_key.get((e.cluster, e.decision_id or "")) or key_at(e.cluster, e.job_id, e.event_time.timestamp())
        ends.append(e if key == e.job_id else e.model_copy(update={"job_id": key}))
    return firsts + later, placed, ends


def fold_events(archived: ArchivedEvents) -> ArchiveEvents:
    """Everything the replay needs, from the archive's events (module docstring)."""
    ev = ArchiveEvents()
    for n in archived.nodes:
        ev.nodes.setdefault(n.cluster, []).append(NodeView.from_telemetry(n, with_allocation=False))
    submissions, decisions, reports = _incarnations(archived)
    for s in submissions:
        job = JobRequest.from_event(s)
        ev.jobs.setdefault((job.cluster, job.job_id), job)
    ends, started = _attempt_ends(reports, archived.end_positions, ev.rejected)
    for d, partition in zip(decisions, archived.placed_partitions, strict=True):
        key = (d.cluster, d.job_id, int(d.attempt))
        end = ends.get(key)
        ev.placed.append(Placed(
            decision_id=d.decision_id, job_id=d.job_id, cluster=d.cluster, attempt=int(d.attempt), node_id=d.node_id,
            gpu_indices=tuple(int(g) for g in d.gpu_indices), policy=d.policy, model_version=d.model_version or "",
            fallback=bool(d.fallback), step_id=d.step_id or "", time=d.event_time.timestamp(), cpu_milli=d.cpu_milli,
            memory_mib=d.memory_mib, gpu_milli_per_gpu=d.gpu_milli_per_gpu,
            candidates=tuple((c.node_id, float(c.score)) for c in d.candidates),
            end_state=end[0] if end else None, end_time=end[1] if end else None,
            end_position=end[2] if end else None, started_time=(started.get(key) or (None, None))[0],
            started_node=(started.get(key) or (None, None))[1], partition=partition,
            lifecycle_through=d.lifecycle_through, feasible_nodes=int(d.feasible_nodes or 0)))  # fmt: skip
    return ev
