"""A live-like run written into a real chdb archive through the archive's own write path
(:class:`storage.writer.ArchiveWriter`), with the ground truth of every decision.

The "live system" here is the scheduling core itself on a virtual clock: a scheduling step
every second places the pending jobs FIFO with ``best-fit`` (:func:`scheduling.assign.place_one`
on one snapshot per step, as the worker does), jobs run for whole seconds (so ends land on
step times: releases and placements share a millisecond), every 7th job fails its first
attempt and is retried, two run past the horizon, and one can never fit (rejected). Decisions
of one step share their event time; their Kafka offsets give their order. Before each
placement the truth records what the policy saw: pair features, the feasible nodes, and the node
state and queue summary of the model call that covers it (the step's start, and the first pending
jobs that fit on some node then, as the worker's learned policy computes them).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

from inference.encoders import EncoderCache, HashedNgramEncoder
from inference.features.jobs import job_demand
from inference.features.nodes import node_state
from inference.features.pairs import pair_features
from inference.features.spec import FeatureSpec
from inference.step_windows import DEFAULT_WINDOW, fitting_window
from scheduling.assign import place_one
from scheduling.events import (
    Candidate,
    DecisionRecord,
    JobLifecycle,
    JobSubmitted,
    NodeTelemetry,
    decision_id_for,
)
from scheduling.filters.framework import run_filters
from scheduling.job import JobRequest
from scheduling.node import NodeView
from scheduling.policies import get_policy
from scheduling.snapshot import ClusterSnapshot
from scheduling.step_result import Placement
from storage.writer import ArchiveWriter
from tests.inference.inference_helpers import pod_mix, small_nodes

T0 = datetime(2026, 3, 1, tzinfo=UTC)
SPEC = FeatureSpec(gpu_models=("A10", "T4", "V100M32"), text_dim=8, encoder="hashed-ngram-8")


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


@dataclass
class Truth:
    decision_id: str
    job_id: str
    attempt: int
    node_index: int
    outcome: str  # finished | failed | running
    nodes: np.ndarray
    pairs: np.ndarray
    feasible: np.ndarray
    queue: np.ndarray
    time: float
    tied: frozenset[int]  # nodes among the archived candidates that scored as high as the chosen one
    pending: int = 0  # the jobs of the model call covering it: those pending that fit somewhere at the step's start
    before: ClusterSnapshot | None = None  # the state the policy saw
    gpus: tuple[int, ...] = ()  # the GPUs it placed the job on
    duration: float = 0.0  # how long the attempt ran (s)


def cluster_nodes(n: int = 10) -> list[NodeView]:
    """``small_nodes`` with ids that sort in their order (the archive lists nodes by id)."""
    return [NodeView(node_id=f"node-{i:02d}", cpu_milli=v.cpu_milli, memory_mib=v.memory_mib, num_gpu=v.num_gpu,
                     gpu_model=v.gpu_model) for i, v in enumerate(small_nodes(n))]  # fmt: skip


def live_run(writer: ArchiveWriter, jobs: int = 36, seed: int = 0, policy: str = "best-fit",
             horizon: int = 60) -> list[Truth]:  # fmt: skip
    rng = np.random.default_rng(seed)
    nodes = cluster_nodes()
    encoder = EncoderCache(HashedNgramEncoder(SPEC.text_dim))
    subs = [JobSubmitted(event_id=f"s-{p.job_id}", event_time=at(i * 0.5), job_id=p.job_id, cpu_milli=p.cpu_milli,
                         memory_mib=p.memory_mib, num_gpu=p.num_gpu, gpu_milli=p.per_gpu_milli, name=f"pod {i}",
                         command="python train.py", labels={"team": "t" + str(i % 3)})
            for i, p in enumerate(pod_mix(jobs, seed))]  # fmt: skip
    subs.append(JobSubmitted(event_id="s-huge", event_time=at(3.0), job_id="huge", num_gpu=16, cpu_milli=1000))
    subs.sort(key=lambda e: e.event_time)
    requests = {e.job_id: JobRequest.from_event(e) for e in subs}
    tel = [NodeTelemetry(event_id=f"t-{n.node_id}", event_time=at(-5), node_id=n.node_id, source="inventory",
                         cpu_milli=n.cpu_milli, memory_mib=n.memory_mib, num_gpu=n.num_gpu, gpu_model=n.gpu_model)
           for n in nodes]  # fmt: skip
    snap = ClusterSnapshot.from_nodes(nodes)
    expert = get_policy(policy)
    pending: list[tuple[JobRequest, int]] = []  # (job, attempt), FIFO
    submitted = 0
    running: list[tuple[float, str, int, int, tuple[int, ...], bool]] = []  # end, job, attempt, node, gpus, fails
    decisions: list[DecisionRecord] = []
    life: list[JobLifecycle] = []
    truths: list[Truth] = []
    for step in range(horizon):
        t = float(step)
        for end, job_id, attempt, node, gpus, fails in sorted(r for r in running if r[0] <= t):
            running.remove((end, job_id, attempt, node, gpus, fails))
            snap.free(node, requests[job_id], gpus)
            life.append(JobLifecycle(event_id=f"e-{job_id}-{attempt}", event_time=at(end), job_id=job_id,
                                     attempt=attempt, decision_id="d", state="failed" if fails else "finished",
                                     exit_code=1 if fails else 0, node_id=nodes[node].node_id))  # fmt: skip
            if fails:
                pending.append((requests[job_id], attempt + 1))
        while submitted < len(subs) and subs[submitted].event_time <= at(t):
            pending.append((requests[subs[submitted].job_id], 0))
            submitted += 1
        if not pending:
            continue
        # the model call's queue summary, as the worker's learned policy computes it: the mean row of the first
        # pending jobs that fit on some node at the step's start (inference/step_windows.py; "huge" never does)
        window = fitting_window([j for j, _ in pending], 0, DEFAULT_WINDOW, snap)
        queue = job_demand(window, at(t).timestamp(), SPEC, encoder).mean(axis=0) if window else None
        nodes_then = node_state(snap, SPEC)  # the call's node state: the step's start (only pair features are re-scored)
        still = []
        for job, attempt in pending:
            before = snap.copy()
            feasible = run_filters(job, before, explain=False).feasible_mask
            res = place_one(snap, job, expert, top_k=3)
            if not isinstance(res, Placement):
                if job.job_id == "huge":
                    decisions.append(DecisionRecord(event_id="d-huge", decision_id="d-huge", event_time=at(t),
                                                    job_id="huge", outcome="rejected", policy=policy,
                                                    latency_ms=1.0, reason="never fits", step_id=f"s{step}"))  # fmt: skip
                    life.append(JobLifecycle(event_id="e-huge", event_time=at(t + 0.5), job_id="huge",
                                             state="rejected", reason="never fits"))  # fmt: skip
                else:
                    still.append((job, attempt))
                continue
            k = int(job.job_id[1:])
            fails = attempt == 0 and k % 7 == 3
            duration = 1000.0 if k in (5, 11) else float(rng.integers(1, 6))
            outcome = "running" if duration > horizon else "failed" if fails else "finished"
            did = decision_id_for(job.job_id, attempt, "sub")
            decisions.append(DecisionRecord(
                event_id=did, decision_id=did, event_time=at(t), job_id=job.job_id, attempt=attempt, outcome="placed",
                node_id=res.node_id, gpu_indices=list(res.gpu_indices), policy=policy, latency_ms=1.0,
                cpu_milli=job.cpu_milli, memory_mib=job.memory_mib, gpu_milli_per_gpu=job.per_gpu_milli,
                step_id=f"s{step}", feasible_nodes=res.feasible_nodes,
                candidates=[Candidate(node_id=n, score=v) for n, v in res.candidates]))  # fmt: skip
            life.append(JobLifecycle(event_id=f"b-{job.job_id}-{attempt}", event_time=at(t + 0.2), job_id=job.job_id,
                                     attempt=attempt, decision_id="d", state="started", node_id=res.node_id))  # fmt: skip
            running.append((t + duration, job.job_id, attempt, res.node_index, tuple(res.gpu_indices), fails))
            truths.append(Truth(did, job.job_id, attempt, res.node_index, outcome, nodes_then,
                                pair_features(job, before, SPEC), feasible, queue, at(t).timestamp(),
                                frozenset(int(n[-2:]) for n, v in res.candidates if v >= res.score),
                                len(window), before, tuple(res.gpu_indices), duration))  # fmt: skip
        pending = still
    for table, events in (("jobs_submitted", subs), ("nodes_telemetry", tel), ("decisions", decisions),
                          ("jobs_lifecycle", life)):  # fmt: skip
        writer.write(table, events, [(0, i) for i in range(len(events))])
    return truths
