"""What ``semsched train --from-archive`` replays, read from the archive as the events it stored.

Four reads, each through a view that keeps one row per event (a redelivered event counts once), times selected as epoch
milliseconds (plain numbers on every client path, including the worker's ``/sql``):

- **nodes**: each node's latest capacity, GPU model and topology (``argMax`` by event time),
  as a :class:`~scheduling.events.NodeTelemetry` with no allocation (the replay starts
  empty and healthy);
- **submissions**: every accepted submission, by cluster, job id and time (a job id used again once
  its job was forgotten names another job: :func:`inference.training.archive_events.fold_events`
  tells them apart by the submission each decision id names);
- **placed**: every ``placed`` decision in the order the worker made them — decisions of
  one step may share a millisecond, so the Kafka position (per cluster partition) breaks
  the tie;
- **ends**: the lifecycle events that start an attempt (``started``), end it (``finished``,
  ``failed``, ``preempted``, ``timed_out``) or give a job up (``rejected``), in the topic's order,
  with their Kafka positions (a decision's ``lifecycle_through`` says which of its partition's
  reports its step had handled; each decision comes with its partition).

**A window** (``since``, ``semsched train --from-archive --since``): the jobs that were over before it
— every one of their events earlier, the latest of them (by time; at one millisecond a report
after a decision after a submission, then in topic order) a rejection or a ``finished`` with exit
code 0, which the worker had applied before the window's first steps (below the least
``lifecycle_through`` of the window's decisions on its partition, where they say; found by review:
under load a report stamped before the window is applied in it, and the node stayed held) — are
not read; every other job is read whole. Those
are the jobs pending or running at the window's start, whose placements held the nodes then, and
the later ones. So the replay rebuilds the state at the window's start without reading the
archive's history before it (found by review: the whole archive was read into memory).

The rows come back as the project's event models (:mod:`scheduling.events`), built without
re-validation (the archive only holds events that were validated on the way in). Folding
them into the replay's timeline is :func:`inference.training.archive_events.fold_events`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scheduling.events import Candidate, DecisionRecord, JobLifecycle, JobSubmitted, NodeTelemetry
from storage.client import ArchiveClient

_NODES = """SELECT cluster, node_id, argMax(event_id, event_time) AS id, toUnixTimestamp64Milli(max(event_time)) AS t,
    argMax(cpu_milli, event_time) AS cpu, argMax(memory_mib, event_time) AS mem, argMax(num_gpu, event_time) AS gpus,
    argMax(gpu_model, event_time) AS model, argMax(topology, event_time) AS topo
FROM nodes_telemetry_accepted GROUP BY cluster, node_id ORDER BY cluster, node_id"""
_SUBMITTED = """SELECT event_id, toUnixTimestamp64Milli(event_time) AS t, cluster, job_id, tenant, user, priority, qos,
    cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_models, gang_id, gang_size, app, max_instances_per_node, name,
    command, labels, runtime_estimate_s, trace_duration_s
FROM jobs_submitted_accepted WHERE __WINDOW__ ORDER BY cluster, job_id, event_time, event_id"""
_PLACED = """SELECT event_id, toUnixTimestamp64Milli(event_time) AS t, decision_id, job_id, cluster, attempt, node_id,
    gpu_indices, policy, model_version, fallback, step_id, latency_ms, cpu_milli, memory_mib, gpu_milli_per_gpu,
    candidates, lifecycle_through, feasible_nodes, kafka_partition
FROM decisions_applied WHERE outcome = 'placed' AND __WINDOW__
ORDER BY event_time, kafka_partition, kafka_offset, decision_id"""
_ENDS = """SELECT event_id, toUnixTimestamp64Milli(event_time) AS t, cluster, job_id, attempt, state, exit_code,
    node_id, decision_id, kafka_partition, kafka_offset
FROM jobs_lifecycle_applied WHERE state IN ('started', 'finished', 'failed', 'preempted', 'timed_out', 'rejected')
    AND __WINDOW__ ORDER BY kafka_partition, kafka_offset"""
# the jobs over before the window (module docstring): their latest event of any kind (a report, at one millisecond
# after a decision, after a submission) is an end for good, and came before it
_OVER_BEFORE = """(cluster, job_id) NOT IN (
    SELECT cluster, job_id FROM (
        SELECT cluster, job_id, toUnixTimestamp64Milli(event_time) AS t, 2 AS kind, kafka_partition, kafka_offset,
               state = 'rejected' OR (state = 'finished' AND ifNull(exit_code, 0) = 0) AS over
        FROM jobs_lifecycle_applied
        UNION ALL SELECT cluster, job_id, toUnixTimestamp64Milli(event_time), 1, kafka_partition, kafka_offset, 0
        FROM decisions_applied
        UNION ALL SELECT cluster, job_id, toUnixTimestamp64Milli(event_time), 0, kafka_partition, kafka_offset, 0
        FROM jobs_submitted_accepted)
    GROUP BY cluster, job_id
    HAVING max(t) < %(since)s AND argMax(over, (t, kind, kafka_partition, kafka_offset)) = 1
       AND __APPLIED__)"""
# per partition, the reports the window's first steps had applied (the least ``lifecycle_through`` of its decisions)
_MARKS = """SELECT kafka_partition, min(lifecycle_through) FROM decisions_applied
WHERE toUnixTimestamp64Milli(event_time) >= %(since)s AND lifecycle_through IS NOT NULL GROUP BY kafka_partition"""
_LAST_AT = "argMax(kafka_offset, (t, kind, kafka_partition, kafka_offset))"  # the job's last report's offset
_LAST_ON = "argMax(kafka_partition, (t, kind, kafka_partition, kafka_offset))"  # and its partition


@dataclass
class TrainingEvents:
    """The archive's events a training replay needs (see the module docstring)."""

    nodes: list[NodeTelemetry] = field(default_factory=list)  # by cluster, node_id
    submissions: list[JobSubmitted] = field(default_factory=list)  # by (cluster, job_id), then time
    placed: list[DecisionRecord] = field(default_factory=list)  # in decision order
    placed_partitions: list[int] = field(default_factory=list)  # each decision's partition (its cluster's)
    ends: list[JobLifecycle] = field(default_factory=list)  # starts and ends, in the topic's order
    end_positions: list[tuple[int, int]] = field(default_factory=list)  # each one's (partition, offset)


def _time(ms: Any) -> datetime:
    return datetime.fromtimestamp(int(ms) / 1000, UTC)


def _candidates(values: Any) -> list[Candidate]:
    """``[Candidate]`` from Arrow structs (dicts) or the worker's JSON (dicts or pairs)."""
    out = []
    for c in values or ():
        node, score = (c["node_id"], c["score"]) if isinstance(c, dict) else (c[0], c[1])
        out.append(Candidate.model_construct(node_id=str(node), score=float(score)))
    return out


def _node(r: tuple[Any, ...]) -> NodeTelemetry:
    cluster, node_id, event_id, t, cpu, mem, gpus, model, topo = r
    return NodeTelemetry.model_construct(event_id=event_id, event_time=_time(t), node_id=node_id, cluster=cluster,
                                         source="inventory", cpu_milli=int(cpu), memory_mib=int(mem),
                                         num_gpu=int(gpus), gpu_model=model or None,
                                         topology=dict(topo or {}))  # fmt: skip


def _submitted(r: tuple[Any, ...]) -> JobSubmitted:
    (event_id, t, cluster, job_id, tenant, user, priority, qos, cpu, mem, ngpu, gpu_milli, models, gang_id, gang_size,
     app, max_inst, name, command, labels, est, dur) = r  # fmt: skip
    return JobSubmitted.model_construct(
        event_id=event_id, event_time=_time(t), job_id=job_id, cluster=cluster, tenant=tenant, user=user or "",
        priority=int(priority), qos=qos, cpu_milli=int(cpu), memory_mib=int(mem), num_gpu=int(ngpu),
        gpu_milli=int(gpu_milli), gpu_models=list(models or ()), gang_id=gang_id, gang_size=int(gang_size), app=app,
        max_instances_per_node=max_inst, name=name or "", command=command or "", labels=dict(labels or {}),
        runtime_estimate_s=est, trace_duration_s=dur)  # fmt: skip


def _placed(r: tuple[Any, ...]) -> DecisionRecord:
    (event_id, t, decision_id, job_id, cluster, attempt, node_id, gpus, policy, model_version, fallback, step_id,
     latency, cpu, mem, per, candidates, through, feasible, _) = r  # fmt: skip
    return DecisionRecord.model_construct(
        event_id=event_id, event_time=_time(t), decision_id=decision_id, job_id=job_id, cluster=cluster,
        attempt=int(attempt), outcome="placed", node_id=node_id, gpu_indices=[int(g) for g in gpus or ()],
        policy=policy, model_version=model_version or "", fallback=bool(fallback), step_id=step_id or "",
        latency_ms=float(latency), cpu_milli=int(cpu), memory_mib=int(mem), gpu_milli_per_gpu=int(per),
        candidates=_candidates(candidates), lifecycle_through=None if through is None else int(through),
        feasible_nodes=int(feasible or 0))  # fmt: skip


def _end(r: tuple[Any, ...]) -> JobLifecycle:
    event_id, t, cluster, job_id, attempt, state, exit_code, node_id, decision_id, _, _ = r
    return JobLifecycle.model_construct(event_id=event_id, event_time=_time(t), cluster=cluster, job_id=job_id,
                                        attempt=int(attempt), state=state, node_id=node_id, decision_id=decision_id,
                                        exit_code=None if exit_code is None else int(exit_code))  # fmt: skip


def training_events(client: ArchiveClient, since: datetime | None = None) -> TrainingEvents:
    """Nodes, submissions, placed decisions and attempt ends of the archive behind ``client``; with
    ``since``, without the jobs over before it (module docstring)."""
    window, params = ("1", None) if since is None else (_OVER_BEFORE, {"since": int(since.timestamp() * 1000)})
    if params is not None:  # over before the window by time, and applied by the worker before its first steps
        marks = {int(p): int(m) for p, m in client.query_rows(_MARKS, params)[1]}
        applied = (f"{_LAST_AT} < multiIf({', '.join(f'{_LAST_ON} = {p}, {m}' for p, m in sorted(marks.items()))}, "
                   f"{_LAST_AT} + 1)" if marks else "1")  # fmt: skip
        window = window.replace("__APPLIED__", applied)

    def rows(sql: str) -> list[tuple[Any, ...]]:
        return client.query_rows(sql.replace("__WINDOW__", window), params)[1]

    placed, ends = rows(_PLACED), rows(_ENDS)
    return TrainingEvents(
        nodes=[_node(r) for r in client.query_rows(_NODES)[1]],
        submissions=[_submitted(r) for r in rows(_SUBMITTED)],
        placed=[_placed(r) for r in placed],
        placed_partitions=[int(r[-1]) for r in placed],
        ends=[_end(r) for r in ends],
        end_positions=[(int(r[-2]), int(r[-1])) for r in ends],
    )
