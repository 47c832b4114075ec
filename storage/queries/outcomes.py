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

_SUBMITTED = """SELECT cluster, job_id, toUnixTimestamp64Milli(event_time) AS t, tenant,
    toUInt32(num_gpu) * if(gpu_milli = 0, 1000, gpu_milli) AS gpu_milli FROM jobs_submitted_accepted"""
_LIFECYCLE = ("SELECT cluster, job_id, attempt, state, toUnixTimestamp64Milli(event_time) AS t "
              "FROM jobs_lifecycle_applied")  # fmt: skip
_PLACED = "SELECT cluster, job_id, attempt FROM decisions_applied WHERE outcome = 'placed'"

_ENDS = ("finished", "failed", "preempted", "rejected")

#: a job: its cluster and its id (an id is unique only within a cluster)
Job = tuple[str, str]


def _job_outcomes(client: ArchiveClient) -> dict[Job, JobOutcome]:
    submit: dict[Job, tuple[int, str, int]] = {}
    for cluster, job_id, t, tenant, gpu in client.query_rows(_SUBMITTED)[1]:
        job = (cluster, job_id)
        if job not in submit or t < submit[job][0]:
            submit[job] = (int(t), tenant, int(gpu))
    starts: dict[Job, int] = {}
    finishes: dict[Job, int] = {}
    rejected: set[Job] = set()
    attempt_states: dict[tuple[str, str, int], set[str]] = defaultdict(set)
    for cluster, job_id, attempt, state, t in client.query_rows(_LIFECYCLE)[1]:
        t, job = int(t), (cluster, job_id)
        attempt_states[(cluster, job_id, int(attempt))].add(state)
        if state == "started":
            starts[job] = min(t, starts.get(job, t))
        elif state == "finished":
            finishes[job] = max(t, finishes.get(job, t))
        elif state == "rejected":
            rejected.add(job)
    running = {(cluster, job) for (cluster, job, _), states in attempt_states.items()
               if "started" in states and not states & set(_ENDS)}  # fmt: skip
    placements: dict[Job, int] = defaultdict(int)
    for cluster, job_id, _ in client.query_rows(_PLACED)[1]:
        placements[(cluster, job_id)] += 1
    out = {}
    for job, (t_submit, tenant, gpu) in sorted(submit.items()):
        state = ("finished" if job in finishes else "rejected" if job in rejected
                 else "running" if job in running else "pending")  # fmt: skip
        start = starts.get(job)
        finish = finishes.get(job)
        out[job] = JobOutcome(
            job_id=job[1], submit=t_submit / 1000, state=state,  # type: ignore[arg-type]
            start=None if start is None else start / 1000, finish=None if finish is None else finish / 1000,
            placements=placements.get(job, 0), gpu_milli=gpu, tenant=tenant,
        )  # fmt: skip
    return out


def job_outcomes(client: ArchiveClient) -> list[JobOutcome]:
    """One outcome per submitted job (a cluster and a job id), by cluster and job id: submit (first
    submission), first start, final finish, placements, state (finished > rejected > running > pending;
    running = an attempt that started and did not end, for a job not finished or rejected)."""
    return list(_job_outcomes(client).values())


_DECIDED = (f"SELECT cluster, job_id, {DECIDED_BY} AS policy, outcome, toUnixTimestamp64Milli(event_time) AS t "
            "FROM decisions_applied")  # fmt: skip


def job_policies(client: ArchiveClient) -> dict[Job, str]:
    """Each job's policy, by (cluster, job id): that of its first placed or rejected decision, else of its
    first decision (jobs never decided are absent)."""
    best: dict[Job, tuple[bool, int, str]] = {}
    for cluster, job_id, policy, outcome, t in client.query_rows(_DECIDED)[1]:
        key, job = (outcome == "unschedulable", int(t), policy), (cluster, job_id)
        if job not in best or key < best[job]:
            best[job] = key
    return {job: k[2] for job, k in best.items()}


def job_outcomes_by_policy(client: ArchiveClient) -> dict[str, list[JobOutcome]]:
    """:func:`job_outcomes` grouped by :func:`job_policies` ('' for jobs never decided)."""
    policy = job_policies(client)
    out: dict[str, list[JobOutcome]] = defaultdict(list)
    for job, o in _job_outcomes(client).items():
        out[policy.get(job, "")].append(o)
    return dict(out)
