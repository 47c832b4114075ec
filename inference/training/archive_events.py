"""Reading what :mod:`inference.training.archive` replays: nodes, submissions, placed
decisions with the end of their attempt, and rejections — four queries, ``FINAL`` (a
redelivered event counts once), times as epoch milliseconds (numbers on every client path)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from scheduling.events import JobSubmitted
from scheduling.job import JobRequest, job_text
from scheduling.node import NodeView

ENDS = ("finished", "failed", "preempted", "timed_out")


class QueryClient(Protocol):
    def query_rows(self, sql: str, parameters: Any = None) -> tuple[list[str], list[tuple[Any, ...]]]: ...


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


@dataclass
class ArchiveEvents:
    nodes: dict[str, list[NodeView]] = field(default_factory=dict)  # cluster -> nodes by node_id
    jobs: dict[tuple[str, str], JobRequest] = field(default_factory=dict)  # (cluster, job_id) -> first submission
    placed: list[Placed] = field(default_factory=list)  # by time
    rejected: dict[tuple[str, str], float] = field(default_factory=dict)  # (cluster, job_id) -> given up at


_NODES = """SELECT cluster, node_id, argMax(cpu_milli, event_time) AS cpu, argMax(memory_mib, event_time) AS mem,
    argMax(num_gpu, event_time) AS gpus, argMax(gpu_model, event_time) AS model,
    argMax(topology, event_time) AS topo
FROM nodes_telemetry FINAL GROUP BY cluster, node_id ORDER BY cluster, node_id"""
_JOBS = """SELECT cluster, job_id, toUnixTimestamp64Milli(event_time) AS t, tenant, user, priority, qos, cpu_milli,
    memory_mib, num_gpu, gpu_milli, gpu_models, gang_id, gang_size, app, max_instances_per_node, name, command,
    labels, runtime_estimate_s, trace_duration_s
FROM jobs_submitted FINAL ORDER BY cluster, job_id, event_time LIMIT 1 BY cluster, job_id"""
# decisions of one step may share a millisecond: the Kafka offset (per cluster partition) is their order
_PLACED = """SELECT decision_id, job_id, cluster, attempt, node_id, gpu_indices, policy, model_version, fallback,
    step_id, toUnixTimestamp64Milli(event_time) AS t, cpu_milli, memory_mib, gpu_milli_per_gpu, candidates
FROM decisions FINAL WHERE outcome = 'placed' ORDER BY event_time, kafka_partition, kafka_offset, decision_id"""
_ENDS = """SELECT cluster, job_id, attempt, state, exit_code, toUnixTimestamp64Milli(event_time) AS t
FROM jobs_lifecycle FINAL WHERE state IN ('finished', 'failed', 'preempted', 'timed_out', 'rejected')
ORDER BY event_time"""


def _job(r: tuple[Any, ...]) -> JobRequest:
    (cluster, job_id, t, tenant, user, priority, qos, cpu, mem, ngpu, gpu_milli, models, gang_id, gang_size, app,
     max_inst, name, command, labels, est, dur) = r  # fmt: skip
    text = job_text(JobSubmitted.model_construct(name=name or "", command=command or "", app=app,
                                                 labels=dict(labels or {})))  # fmt: skip
    ngpu = int(ngpu)
    per = 0 if ngpu == 0 else (int(gpu_milli) if 0 < int(gpu_milli) <= 1000 else 1000)
    return JobRequest(job_id=job_id, cluster=cluster, tenant=tenant, priority=int(priority), qos=qos,
                      cpu_milli=int(cpu), memory_mib=int(mem), num_gpu=ngpu, per_gpu_milli=per,
                      gpu_models=frozenset(models or ()), gang_id=gang_id, gang_size=int(gang_size), app=app,
                      max_instances_per_node=max_inst, submit_time=int(t) / 1000, runtime_estimate_s=est,
                      trace_duration_s=dur, user=user, text=text)  # fmt: skip


def _candidates(values: Any) -> tuple[tuple[str, float], ...]:
    """``[(node_id, score)]`` from Arrow structs (dicts) or the worker's JSON (dicts or pairs)."""
    out = []
    for c in values or ():
        node, score = (c["node_id"], c["score"]) if isinstance(c, dict) else (c[0], c[1])
        out.append((str(node), float(score)))
    return tuple(out)


def read_archive(client: QueryClient) -> ArchiveEvents:
    """Everything the replay needs, from the archive behind ``client``."""
    ev = ArchiveEvents()
    for cluster, node_id, cpu, mem, gpus, model, topo in client.query_rows(_NODES)[1]:
        ev.nodes.setdefault(cluster, []).append(NodeView(
            node_id=node_id, cluster=cluster, cpu_milli=int(cpu), memory_mib=int(mem), num_gpu=int(gpus),
            gpu_model=model or None, topology=dict(topo or {})))  # fmt: skip
    for r in client.query_rows(_JOBS)[1]:
        job = _job(r)
        ev.jobs[(job.cluster, job.job_id)] = job
    ends: dict[tuple[str, str, int], tuple[str, float]] = {}
    for cluster, job_id, attempt, state, exit_code, t in client.query_rows(_ENDS)[1]:
        t = int(t) / 1000
        if state == "rejected":
            ev.rejected.setdefault((cluster, job_id), t)
        if state == "finished" and exit_code not in (None, 0):
            state = "failed"
        key = (cluster, job_id, int(attempt))
        if key not in ends or (ends[key][0] == "rejected" and state != "rejected"):
            ends[key] = (state, t)  # the attempt's first end (rows come in time order)
    for (dec, job_id, cluster, attempt, node_id, gpus, policy, mv, fallback, step, t, cpu, mem, per, cands) in client.query_rows(
            _PLACED)[1]:  # fmt: skip
        end = ends.get((cluster, job_id, int(attempt)))
        ev.placed.append(Placed(
            decision_id=dec, job_id=job_id, cluster=cluster, attempt=int(attempt), node_id=node_id,
            gpu_indices=tuple(int(g) for g in gpus or ()), policy=policy, model_version=mv or "",
            fallback=bool(fallback), step_id=step or "", time=int(t) / 1000, cpu_milli=int(cpu), memory_mib=int(mem),
            gpu_milli_per_gpu=int(per), candidates=_candidates(cands), end_state=end[0] if end else None,
            end_time=end[1] if end else None))  # fmt: skip
    return ev
