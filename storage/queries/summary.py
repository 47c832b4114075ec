"""The run summary: counts, JCT, queueing delay, GPU allocation, decision latency and
dead letters (definitions in :mod:`storage.queries`; the metrics come from
:mod:`storage.queries.metrics`, the same SQL the dashboards and the agreement test use)."""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduling.events import INTERNAL_ERROR
from scheduling.metrics import AllocationSample, mean_allocation
from storage.client import ArchiveClient
from storage.queries._common import _RUNNING, _dicts
from storage.queries.metrics import (
    GPU_CAPACITY,
    deadletters_by_reason,
    decision_latency,
    gpu_allocation,
    job_metrics,
)


@dataclass(frozen=True)
class Summary:
    submitted: int
    placed: int
    finished: int
    failed: int  # failed attempts (a job that failed twice counts twice)
    rejected: int
    running: int
    rejected_by_reason: dict[str, int]
    unschedulable_by_reason: dict[str, int]
    jct_mean_s: float | None
    jct_p95_s: float | None
    queueing_delay_mean_s: float | None
    decision_latency_p50_ms: float | None
    decision_latency_p99_ms: float | None
    gpu_allocation: list[AllocationSample]  # time-weighted per bucket
    deadletters_by_reason: dict[str, int]
    #: placements per deciding model ("<version>", or "fallback (<version>)" when the model call
    #: failed and the fallback heuristic decided); empty when no model-backed policy ran
    placed_by_model: dict[str, int] = field(default_factory=dict)
    #: the share of GPU capacity held from the first holding's bucket to the run's end (scheduling.metrics.mean_allocation)
    gpu_allocation_mean: float | None = None
    #: submission messages refused with a reason (dead-lettered, not for an internal error: that one is
    #: applied again); ``submitted + refused`` is every submission the archive accounts for
    refused: int = 0


# a job is a cluster and a job id (an id is unique only within a cluster)
_COUNTS = """
SELECT
    (SELECT uniqExact(cluster, job_id) FROM jobs_submitted_accepted) AS submitted,
    (SELECT uniqExact(topic_partition, topic_offset) FROM deadletter FINAL
     WHERE topic = 'jobs.submitted' AND NOT startsWith(reason, '__INTERNAL_ERROR__')) AS refused,
    (SELECT uniqExact(cluster, job_id) FROM decisions_applied WHERE outcome = 'placed' AND __ACCEPTED__) AS placed,
    (SELECT uniqExactIf((cluster, job_id, attempt), state = 'failed') FROM jobs_lifecycle_applied
     WHERE __ACCEPTED__) AS failed,
    (SELECT uniqExact(cluster, job_id) FROM (__RUNNING__) WHERE __ACCEPTED__) AS running
"""
# the jobs the submitted count holds, as job_metrics counts them (found by review: the reports of a job whose
# submission was refused counted as running and failed, beside 0 unfinished in the job metrics)
_ACCEPTED = "(cluster, job_id) IN (SELECT cluster, job_id FROM jobs_submitted_accepted)"
_COUNTS = (_COUNTS.replace("__RUNNING__", _RUNNING).replace("__INTERNAL_ERROR__", INTERNAL_ERROR)
           .replace("__ACCEPTED__", _ACCEPTED))

_REJECTED_BY_REASON = """
SELECT reason, count() AS jobs FROM
    (SELECT cluster, job_id, argMax(reason, event_time) AS reason FROM jobs_lifecycle_applied
     WHERE state = 'rejected'
       AND (cluster, job_id) IN (SELECT cluster, job_id FROM jobs_submitted_accepted)
       AND (cluster, job_id) NOT IN (SELECT cluster, job_id FROM jobs_lifecycle_applied WHERE state = 'finished')
     GROUP BY cluster, job_id)
GROUP BY reason ORDER BY jobs DESC, reason
"""

_UNSCHEDULABLE_BY_REASON = """
SELECT reason, count() AS jobs FROM
    (SELECT cluster, job_id, argMax(reason, event_time) AS reason FROM decisions_applied
     WHERE outcome = 'unschedulable' GROUP BY cluster, job_id)
GROUP BY reason ORDER BY jobs DESC, reason
"""

_PLACED_BY_MODEL = """
SELECT if(fallback, concat('fallback (', if(model_version = '', 'no model', model_version), ')'), model_version) AS model,
       uniqExact(cluster, job_id, attempt) AS placements
FROM decisions_applied WHERE outcome = 'placed' AND (model_version != '' OR fallback)
GROUP BY model ORDER BY placements DESC, model
"""


def summary(client: ArchiveClient, bucket_s: float = 60.0) -> Summary:
    """Counts, JCT, queueing delay, GPU allocation, decision latency and dead letters."""
    (c,) = _dicts(client, _COUNTS)
    jobs = job_metrics(client).get("all")
    lat = decision_latency(client).get("all")
    allocation = gpu_allocation(client, bucket_s)
    # the run's end, where gpu_allocation cuts its last bucket
    end_ms = _dicts(client, GPU_CAPACITY)[0]["end_ms"] if allocation else None
    return Summary(
        submitted=int(c["submitted"]),
        refused=int(c["refused"]),
        placed=int(c["placed"]),
        # the submitted jobs that finished, as job_metrics counts them (found by review: counted from the reports
        # alone, a job never submitted counted too, and finished could exceed submitted)
        finished=jobs.finished if jobs else 0,
        failed=int(c["failed"]),
        # (as job_metrics counts them too: found by review, a job that finished and also had the worker's
        # give-up notice counted as finished and rejected, and the states added up to more jobs than settled)
        rejected=jobs.rejected if jobs else 0,
        running=int(c["running"]),
        rejected_by_reason={r["reason"]: int(r["jobs"]) for r in _dicts(client, _REJECTED_BY_REASON)},
        unschedulable_by_reason={r["reason"]: int(r["jobs"])
                                 for r in _dicts(client, _UNSCHEDULABLE_BY_REASON)},
        jct_mean_s=jobs.jct.mean if jobs else None,
        jct_p95_s=jobs.jct.p95 if jobs else None,
        queueing_delay_mean_s=jobs.queueing_delay.mean if jobs else None,
        decision_latency_p50_ms=lat.p50 if lat else None,
        decision_latency_p99_ms=lat.p99 if lat else None,
        gpu_allocation=allocation,
        deadletters_by_reason=deadletters_by_reason(client),
        placed_by_model={r["model"]: int(r["placements"]) for r in _dicts(client, _PLACED_BY_MODEL)},
        gpu_allocation_mean=None if end_ms is None else mean_allocation(allocation, bucket_s, int(end_ms) / 1000),
    )  # fmt: skip

