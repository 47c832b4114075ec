"""The run summary: counts, JCT, queueing delay, GPU allocation, decision latency and
dead letters (definitions in :mod:`storage.queries`)."""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.metrics import AllocationSample, Holding, allocation_over_time
from storage.client import ArchiveClient
from storage.queries._common import _RUNNING, _dicts, _f


@dataclass(frozen=True)
class Summary:
    submitted: int
    placed: int
    finished: int
    failed: int
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


_COUNTS = """
SELECT
    (SELECT uniqExact(job_id) FROM jobs_submitted FINAL) AS submitted,
    (SELECT uniqExact(job_id) FROM decisions FINAL WHERE outcome = 'placed') AS placed,
    (SELECT uniqExactIf(job_id, state = 'finished') FROM jobs_lifecycle FINAL) AS finished,
    (SELECT uniqExactIf(job_id, state = 'failed') FROM jobs_lifecycle FINAL) AS failed,
    (SELECT uniqExactIf(job_id, state = 'rejected') FROM jobs_lifecycle FINAL) AS rejected,
    (SELECT uniqExact(job_id) FROM (__RUNNING__)) AS running
"""
_COUNTS = _COUNTS.replace("__RUNNING__", _RUNNING)

_REJECTED_BY_REASON = """
SELECT reason, uniqExact(job_id) AS jobs FROM
    (SELECT job_id, argMax(reason, event_time) AS reason FROM jobs_lifecycle FINAL
     WHERE state = 'rejected' GROUP BY job_id)
GROUP BY reason ORDER BY jobs DESC, reason
"""

_UNSCHEDULABLE_BY_REASON = """
SELECT reason, uniqExact(job_id) AS jobs FROM
    (SELECT job_id, argMax(reason, event_time) AS reason FROM decisions FINAL
     WHERE outcome = 'unschedulable' GROUP BY job_id)
GROUP BY reason ORDER BY jobs DESC, reason
"""

_TIMES = """
WITH
    sub AS (SELECT job_id, min(event_time) AS t FROM jobs_submitted FINAL GROUP BY job_id),
    fin AS (SELECT job_id, min(event_time) AS t FROM jobs_lifecycle FINAL
            WHERE state = 'finished' GROUP BY job_id),
    st AS (SELECT job_id, min(event_time) AS t FROM jobs_lifecycle FINAL
           WHERE state = 'started' GROUP BY job_id)
SELECT
    (SELECT avg(dateDiff('millisecond', sub.t, fin.t)) / 1000 FROM sub INNER JOIN fin USING job_id) AS jct_mean_s,
    (SELECT quantileExactInclusive(0.95)(dateDiff('millisecond', sub.t, fin.t)) / 1000
       FROM sub INNER JOIN fin USING job_id) AS jct_p95_s,
    (SELECT avg(dateDiff('millisecond', sub.t, st.t)) / 1000 FROM sub INNER JOIN st USING job_id) AS queue_mean_s,
    (SELECT quantileExactInclusive(0.5)(latency_ms) FROM decisions FINAL WHERE outcome = 'placed') AS lat_p50,
    (SELECT quantileExactInclusive(0.99)(latency_ms) FROM decisions FINAL WHERE outcome = 'placed') AS lat_p99,
    (SELECT count() FROM sub INNER JOIN fin USING job_id) AS n_fin,
    (SELECT countIf(outcome = 'placed') FROM decisions FINAL) AS n_placed
"""

# What each placement held and when: from its first ``started`` to its first end
# (finished / failed / preempted), joined to its decision for the GPUs; the metric itself
# is scheduling.metrics.allocation_over_time.
_GPU_HOLDINGS = """
SELECT toUnixTimestamp64Milli(s) AS start_ms,
       if(isNull(e), NULL, toUnixTimestamp64Milli(assumeNotNull(e))) AS end_ms,
       toUInt32(d.gpu_milli_per_gpu) * length(d.gpu_indices) AS gpu_milli
FROM (
    SELECT job_id, attempt,
           minIf(event_time, state = 'started') AS s,
           if(countIf(state IN ('finished', 'failed', 'preempted')) > 0,
              minIf(event_time, state IN ('finished', 'failed', 'preempted')), NULL) AS e
    FROM jobs_lifecycle FINAL
    GROUP BY job_id, attempt
    HAVING countIf(state = 'started') > 0
) AS l
INNER JOIN (SELECT job_id, attempt, gpu_milli_per_gpu, gpu_indices FROM decisions FINAL
            WHERE outcome = 'placed') AS d
    ON l.job_id = d.job_id AND l.attempt = d.attempt
"""

_GPU_CAPACITY = """
SELECT sum(cap) AS capacity, toUnixTimestamp64Milli(
    (SELECT max(event_time) FROM jobs_lifecycle FINAL)) AS end_ms
FROM (SELECT argMax(toUInt32(num_gpu) * 1000, event_time) AS cap FROM nodes_telemetry FINAL
      GROUP BY cluster, node_id)
"""


def gpu_allocation(client: ArchiveClient, bucket_s: float = 60.0) -> list[AllocationSample]:
    """GPU allocation over time (see :func:`scheduling.metrics.allocation_over_time`)."""
    holdings = [Holding(int(r["start_ms"]) / 1000, None if r["end_ms"] is None else int(r["end_ms"]) / 1000,
                        int(r["gpu_milli"])) for r in _dicts(client, _GPU_HOLDINGS)]  # fmt: skip
    if not holdings:
        return []
    (cap,) = _dicts(client, _GPU_CAPACITY)
    return allocation_over_time(holdings, int(cap["capacity"] or 0), bucket_s=bucket_s,
                                end=int(cap["end_ms"]) / 1000)  # fmt: skip


_DEADLETTERS_BY_REASON = """
SELECT reason,
       uniqExact(if(topic_offset >= 0,
                    concat(topic, ':', toString(topic_partition), ':', toString(topic_offset)),
                    event_id)) AS messages
FROM deadletter FINAL GROUP BY reason ORDER BY messages DESC, reason
"""


def summary(client: ArchiveClient, bucket_s: float = 60.0) -> Summary:
    """Counts, JCT, queueing delay, GPU allocation, decision latency and dead letters."""
    (c,) = _dicts(client, _COUNTS)
    (t,) = _dicts(client, _TIMES)
    fin, placed = int(t["n_fin"]), int(t["n_placed"])
    return Summary(
        submitted=int(c["submitted"]),
        placed=int(c["placed"]),
        finished=int(c["finished"]),
        failed=int(c["failed"]),
        rejected=int(c["rejected"]),
        running=int(c["running"]),
        rejected_by_reason={r["reason"]: int(r["jobs"]) for r in _dicts(client, _REJECTED_BY_REASON)},
        unschedulable_by_reason={r["reason"]: int(r["jobs"])
                                 for r in _dicts(client, _UNSCHEDULABLE_BY_REASON)},
        jct_mean_s=_f(t["jct_mean_s"]) if fin else None,
        jct_p95_s=_f(t["jct_p95_s"]) if fin else None,
        queueing_delay_mean_s=_f(t["queue_mean_s"]),
        decision_latency_p50_ms=_f(t["lat_p50"]) if placed else None,
        decision_latency_p99_ms=_f(t["lat_p99"]) if placed else None,
        gpu_allocation=gpu_allocation(client, bucket_s),
        deadletters_by_reason={r["reason"]: int(r["messages"]) for r in _dicts(client, _DEADLETTERS_BY_REASON)},
    )  # fmt: skip
