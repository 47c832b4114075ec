"""``JobOutcome`` rows rebuilt from the archive's raw events, in Python.

The SQL here only reads events (no aggregation beyond FINAL's dedupe); the per-job fold is
plain Python, so ``scheduling.metrics.job_metrics(job_outcomes(client))`` is an independent
computation of what :func:`storage.queries.metrics.job_metrics` does in ClickHouse — the
agreement test compares the two.
"""

from __future__ import annotations

from collections import defaultdict

from scheduling.metrics import JobOutcome
from storage.client import ArchiveClient
from storage.queries._common import DECIDED_BY

_SUBMITTED = """SELECT job_id, toUnixTimestamp64Milli(event_time) AS t, tenant,
    toUInt32(num_gpu) * if(gpu_milli = 0, 1000, gpu_milli) AS gpu_milli FROM jobs_submitted_accepted"""
_LIFECYCLE = "SELECT job_id, attempt, state, toUnixTimestamp64Milli(event_time) AS t FROM jobs_lifecycle_applied"
_PLACED = "SELECT job_id, attempt FROM decisions_applied WHERE outcome = 'placed'"

_ENDS = ("finished", "failed", "preempted", "rejected")


def job_outcomes(client: ArchiveClient) -> list[JobOutcome]:
    """One outcome per submitted job: submit (first submission), first start, final finish,
    placements, state (finished > rejected > running > pending; running = an attempt that
    started and did not end, for a job not finished or rejected)."""
    submit: dict[str, tuple[int, str, int]] = {}
    for job_id, t, tenant, gpu in client.query_rows(_SUBMITTED)[1]:
        if job_id not in submit or t < submit[job_id][0]:
            submit[job_id] = (int(t), tenant, int(gpu))
    starts: dict[str, int] = {}
    finishes: dict[str, int] = {}
    rejected: set[str] = set()
    attempt_states: dict[tuple[str, int], set[str]] = defaultdict(set)
    for job_id, attempt, state, t in client.query_rows(_LIFECYCLE)[1]:
        t = int(t)
        attempt_states[(job_id, int(attempt))].add(state)
        if state == "started":
            starts[job_id] = min(t, starts.get(job_id, t))
        elif state == "finished":
            finishes[job_id] = max(t, finishes.get(job_id, t))
        elif state == "rejected":
            rejected.add(job_id)
    running = {job for (job, _), states in attempt_states.items()
               if "started" in states and not states & set(_ENDS)}  # fmt: skip
    placements: dict[str, int] = defaultdict(int)
    for job_id, _ in client.query_rows(_PLACED)[1]:
        placements[job_id] += 1
    out = []
    for job_id, (t_submit, tenant, gpu) in sorted(submit.items()):
        state = ("finished" if job_id in finishes else "rejected" if job_id in rejected
                 else "running" if job_id in running else "pending")  # fmt: skip
        start = starts.get(job_id)
        finish = finishes.get(job_id)
        out.append(JobOutcome(
            job_id=job_id, submit=t_submit / 1000, state=state,  # type: ignore[arg-type]
            start=None if start is None else start / 1000, finish=None if finish is None else finish / 1000,
            placements=placements.get(job_id, 0), gpu_milli=gpu, tenant=tenant,
        ))  # fmt: skip
    return out


_DECIDED = f"SELECT job_id, {DECIDED_BY} AS policy, outcome, toUnixTimestamp64Milli(event_time) AS t FROM decisions_applied"


def job_policies(client: ArchiveClient) -> dict[str, str]:
    """Each job's policy: that of its first placed or rejected decision, else of its first
    decision (jobs never decided are absent)."""
    best: dict[str, tuple[bool, int, str]] = {}
    for job_id, policy, outcome, t in client.query_rows(_DECIDED)[1]:
        key = (outcome == "unschedulable", int(t), policy)
        if job_id not in best or key < best[job_id]:
            best[job_id] = key
    return {job: k[2] for job, k in best.items()}


def job_outcomes_by_policy(client: ArchiveClient) -> dict[str, list[JobOutcome]]:
    """:func:`job_outcomes` grouped by :func:`job_policies` ('' for jobs never decided)."""
    policy = job_policies(client)
    out: dict[str, list[JobOutcome]] = defaultdict(list)
    for o in job_outcomes(client):
        out[policy.get(o.job_id, "")].append(o)
    return dict(out)
