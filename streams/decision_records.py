"""Decision records: turn a scheduling step's outcome into the rows the worker publishes on
``decisions`` (and archives), and into the commands for the cluster agents.

One place says what a decision record carries — the policy, the model version that decided,
whether the heuristic fallback scored the job and why, the cost estimator's predicted cost,
the duration predictor's estimate, the step and its compute time — so the scheduling loop
(``loop.py``) only schedules and publishes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduling.events import (
    MAX_TEXT,
    Candidate,
    DecisionRecord,
    JobSubmitted,
    PlacementCommand,
    cut_text,
    decision_id_for,
    derived_event_id,
    new_event_id,
)
from scheduling.job import JobRequest
from scheduling.step_result import Placement
from streams.state import PendingJob, RunningJob


@dataclass(frozen=True)
class StepModel:
    """What the policy's model said about one step, read once after the step is scheduled:
    the model version that decided (per job: the version whose call scored it, where a step's
    windows were answered by different versions), the jobs the heuristic fallback scored instead (with the
    reason appended to their records), the learned cost estimator ψ (fragmentation added and, with
    a second column, the expected run time), if the policy has one, and
    its notes on single decisions (the lookahead's, appended to their records' reason).
    A heuristic policy has none of these: empty version, no fallback, no cost."""

    version: str = ""
    fallback_name: str = ""  # the heuristic that decides when the model cannot
    fallback_note: str = ""  # "; <backend> fell back to <heuristic>: <reason>"
    fallback_jobs: Collection[str] = field(default_factory=frozenset)
    cost_of: Callable[[str, int], float | None] | None = None
    run_time_of: Callable[[str, int], float | None] | None = None  # ψ's expected run time, s
    notes: Mapping[str, str] = field(default_factory=dict)  # job id -> the policy's note (the lookahead's)
    version_of: Callable[[str], str | None] | None = None  # the version whose call scored a job, when not ``version``

    @classmethod
    def of(cls, policy: Any) -> StepModel:
        """Read a (possibly model-backed) policy's account of the step it just scheduled."""
        model = getattr(policy, "last_step", None)  # which model version decided, or why not
        return cls(
            version=(model.version or "") if model else "",
            fallback_name=getattr(policy, "fallback_name", "") if model else "",
            fallback_note=f"; {model.backend or 'no model'} fell back to {policy.fallback_name}: {model.reason}"
            if model else "",  # (no backend: the model could not be loaded at all)
            fallback_jobs=getattr(policy, "fallback_jobs", set()),  # jobs the heuristic scored
            cost_of=getattr(policy, "predicted_cost", None),
            run_time_of=getattr(policy, "predicted_run_time", None),
            notes=dict(getattr(policy, "decision_notes", {})),
            version_of=getattr(policy, "scored_version", None),
        )


def predicted_durations(estimator: Any, jobs: Sequence[JobRequest]) -> dict[str, float]:
    """The duration predictor's estimates for the decision records (one batch when it has one);
    jobs it has no finite estimate for are left out."""
    many = getattr(estimator, "predict_many", None)
    values = list(many(jobs)) if many is not None and jobs else [estimator.predict(j) for j in jobs]
    return {j.job_id: float(v) for j, v in zip(jobs, values, strict=True) if v is not None and math.isfinite(v)}


def placed_record(p: PendingJob, pl: Placement, *, cluster: str, policy: str, step_id: str, compute_ms: float,
                  model: StepModel, durations: dict[str, float], now: float | None = None,
                  lifecycle_through: int | None = None) -> DecisionRecord:  # fmt: skip
    """The decision record of a placement. ``latency_ms`` runs from submission (first attempt)
    or from re-queueing (later attempts) to ``now``; ``lifecycle_through``: the state its step saw
    (:attr:`~scheduling.events.DecisionRecord.lifecycle_through`)."""
    now = time.time() if now is None else now
    since = p.submit_ts if p.attempt == 0 else p.queued_ts
    did = decision_id_for(p.job.job_id, p.attempt, p.job.event_id)
    fell_back = pl.job_id in model.fallback_jobs
    reason = pl.reason
    if fell_back:  # the heuristic scored it: its name heads the reason ("fgd: highest score 50 …"), then why
        head = f"{policy}:"
        reason = (f"{model.fallback_name}:{reason[len(head):]}" if reason.startswith(head) else reason) + model.fallback_note
    return DecisionRecord(
        event_id=did, decision_id=did, job_id=p.job.job_id, cluster=cluster, attempt=p.attempt,
        outcome="placed", node_id=pl.node_id, gpu_indices=list(pl.gpu_indices), policy=policy,
        candidates=[Candidate(node_id=n, score=float(s)) for n, s in pl.candidates],
        feasible_nodes=pl.feasible_nodes, latency_ms=max(0.0, (now - since) * 1000),
        step_compute_ms=compute_ms, submit_time=p.job.event_time,
        reason=reason + (f"; {model.notes[pl.job_id]}" if pl.job_id in model.notes else ""),
        cpu_milli=p.job.cpu_milli, memory_mib=p.job.memory_mib, gpu_milli_per_gpu=p.job.per_gpu_milli,
        trace_duration_s=p.job.trace_duration_s, step_id=step_id,
        model_version=(model.version_of(pl.job_id) if model.version_of else None) or model.version,
        fallback=fell_back, predicted_duration_s=durations.get(pl.job_id),
        predicted_cost=model.cost_of(pl.job_id, pl.node_index) if model.cost_of else None,
        predicted_run_time_s=model.run_time_of(pl.job_id, pl.node_index) if model.run_time_of else None,
        lifecycle_through=lifecycle_through,
    )  # fmt: skip


def placement_command(p: PendingJob, rec: DecisionRecord) -> PlacementCommand:
    """The command that tells the node's agent to start the job: its record's placement, decision id, reason
    and model version (found by review: a placement the fallback heuristic scored went out with the learned
    policy's reason and no model version, its record with the heuristic's and the version)."""
    assert rec.node_id is not None
    return _command(p.job, p.attempt, rec.decision_id, rec.node_id, rec.gpu_indices, cluster=rec.cluster,
                    policy=rec.policy, reason=cut_text(rec.reason, MAX_TEXT), what="place",
                    model_version=rec.model_version or "")  # fmt: skip


def held_placement_command(r: RunningJob, *, policy: str, reason: str) -> PlacementCommand:
    """The command of the placement ``r`` holds, sent again (streams/uncommanded.py): an event of its own in
    the archive (the first keeps its reason and time), however often it is sent again."""
    return _command(r.job, r.attempt, r.decision_id, r.node_id, r.gpu_indices, cluster=r.job.cluster, policy=policy,
                    reason=reason, what="place again")  # fmt: skip


def _command(job: JobSubmitted, attempt: int, decision_id: str, node_id: str, gpu_indices: Sequence[int], *,
             cluster: str, policy: str, reason: str, what: str, model_version: str = "") -> PlacementCommand:  # fmt: skip
    """The same placement's command has the same event id each time it is sent (the archive keeps one row)."""
    placement = f"{cluster}/{decision_id}@{node_id}:{list(gpu_indices)}"
    return PlacementCommand(
        event_id=derived_event_id(placement, what), decision_id=decision_id, job_id=job.job_id, cluster=cluster,
        attempt=attempt, node_id=node_id, gpu_indices=list(gpu_indices), cpu_milli=job.cpu_milli,
        memory_mib=job.memory_mib, gpu_milli_per_gpu=job.per_gpu_milli, policy=policy, reason=reason,
        trace_duration_s=job.trace_duration_s, model_version=model_version,
    )  # fmt: skip


def rejected_record(p: PendingJob, reason: str, *, policy: str, step_id: str, compute_ms: float,
                    now: float | None = None) -> DecisionRecord:  # fmt: skip
    """The decision record that gives up on a job (it can never run); its id is the job's
    attempt's decision id, so a repeated rejection is the same decision."""
    now = time.time() if now is None else now
    did = decision_id_for(p.job.job_id, p.attempt, p.job.event_id)
    return DecisionRecord(
        event_id=did, decision_id=did, job_id=p.job.job_id, cluster=p.job.cluster, attempt=p.attempt,
        outcome="rejected", policy=policy, latency_ms=max(0.0, (now - p.submit_ts) * 1000),
        step_compute_ms=compute_ms, submit_time=p.job.event_time, reason=reason, step_id=step_id,
    )  # fmt: skip


def waiting_record(p: PendingJob, reason: str, *, policy: str, step_id: str, compute_ms: float) -> DecisionRecord:
    """The record of why a job is still pending (for ``explain``); a fresh id each time, since
    it is a note rather than a decision."""
    return DecisionRecord(
        event_id=new_event_id(), decision_id=f"u-{new_event_id()}", job_id=p.job.job_id, cluster=p.job.cluster,
        attempt=p.attempt, outcome="unschedulable", policy=policy, latency_ms=0.0,
        step_compute_ms=compute_ms, submit_time=p.job.event_time, reason=reason, step_id=step_id,
    )  # fmt: skip
