"""Every metric of :mod:`scheduling.metrics`, computed in SQL over the archive, overall or
per policy (``decisions.policy``).

The definitions are the ones of ``scheduling/metrics`` (read there); what the archive adds:

- **per job** (:func:`jobs_sql`; a job is a cluster and a job id: an id is unique only within a
  cluster, and every read below groups and joins by both): submit = its first ``jobs_submitted`` event; first start = its
  first ``started``; finish = its last ``finished``; state = finished, else rejected (a
  ``rejected`` lifecycle event), else running (an attempt started and not ended), else
  pending; placements = its ``placed`` decisions (one per attempt); policy = the policy of
  its first placed or rejected decision (else of its first decision; '' if none).
- **decision latency** = ``decisions.latency_ms`` of placed decisions (submit, or re-queue for
  a later attempt, → command).
- **step compute time** is recorded on every decision of a step (``step_compute_ms``, the
  same value for all of them), so a step is one distinct (cluster, policy, step_compute_ms)
  with a value > 0: steps that wrote no decision are not in the archive, and two steps of
  one cluster with the very same float compute time would count once.
- **placement stability**: a placement (job, attempt) is reversed when the job has a
  ``failed`` or ``preempted`` event at that attempt, a ``timed_out`` read before the attempt's
  first ``started``, or any later attempt in the archive (a timeout or failure re-queues the job
  at attempt + 1; a ``timed_out`` that raced with ``started`` and kept the job running is not a
  reversal). The timeout counts in its own right: the job's next decision may be written only
  when it is placed again (found by review: until then the placement read as stable). Its cause and time are those of
  the first report that ended the attempt as the worker applied them (in the order it read
  them: lifecycle partition position, then event time): a ``preempted`` or ``failed``, or a
  ``timed_out`` read before the attempt's first ``started`` (one read after it raced with the
  start: the worker kept the run, and a later preemption is what ended it).
- **GPU allocation** over time: :func:`gpu_allocation` feeds the holdings to
  :func:`scheduling.metrics.allocation_over_time`; :func:`gpu_allocation_sql` is the same
  definition in SQL (what the dashboard runs), tested equal.

Percentiles are ``quantilesExactInclusive`` = numpy's linear percentiles
(:class:`scheduling.metrics.Distribution`). Times are epoch milliseconds in SQL.
SQL builders take filter expressions (``"1"`` = everything), so the dashboard panels in
:mod:`storage.queries.panels` reuse them with Grafana's time macros.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from scheduling.events import FALLBACK_SUFFIX
from scheduling.metrics import AllocationSample, Distribution, Holding, JobMetrics, allocation_over_time
from storage.client import ArchiveClient
from storage.queries._common import _RUNNING, DECIDED_BY, _dicts, _f

Group = Literal["all", "policy"]
ALL = "all"
_GROUP_EXPR = {"all": "'all'", "policy": "policy"}


def _group(group: Group) -> str:
    return _GROUP_EXPR[group]


# -- jobs -----------------------------------------------------------------------------------

def jobs_sql(submit_filter: str = "1") -> str:
    """One row per submitted job, per cluster and job id (``submit_filter`` on ``jobs_submitted``): times
    in epoch ms."""
    return f"""
SELECT s.cluster AS cluster, s.job_id AS job_id, s.submit_ms AS submit_ms,
       l.n_started > 0 AS started, l.start_ms AS start_ms, l.finish_ms AS finish_ms,
       multiIf(l.n_finished > 0, 'finished', l.n_rejected > 0, 'rejected',
               (s.cluster, s.job_id) IN ({_RUNNING}), 'running', 'pending') AS state,
       d.placements AS placements, d.policy AS policy
FROM (SELECT cluster, job_id, min(toUnixTimestamp64Milli(event_time)) AS submit_ms FROM jobs_submitted_accepted
      WHERE {submit_filter} GROUP BY cluster, job_id) AS s
LEFT JOIN (SELECT cluster, job_id, countIf(state = 'started') AS n_started,
                  minIf(toUnixTimestamp64Milli(event_time), state = 'started') AS start_ms,
                  countIf(state = 'finished') AS n_finished,
                  maxIf(toUnixTimestamp64Milli(event_time), state = 'finished') AS finish_ms,
                  countIf(state = 'rejected') AS n_rejected
           FROM jobs_lifecycle_applied GROUP BY cluster, job_id) AS l ON s.cluster = l.cluster AND s.job_id = l.job_id
LEFT JOIN (SELECT cluster, job_id, countIf(outcome = 'placed') AS placements,
                  argMin({DECIDED_BY}, (outcome = 'unschedulable', event_time)) AS policy
           FROM decisions_applied GROUP BY cluster, job_id) AS d ON s.cluster = d.cluster AND s.job_id = d.job_id
"""


def job_metrics_sql(group: Group = "all", submit_filter: str = "1") -> str:
    """:func:`scheduling.metrics.job_metrics`, in SQL, per group (jobs by submission time)."""
    return f"""
SELECT {_group(group)} AS grp,
    count() AS jobs, countIf(fin) AS finished, countIf(state = 'rejected') AS rejected,
    countIf(state IN ('pending', 'running')) AS unfinished,
    avgIf(jct_s, fin) AS jct_mean, quantilesExactInclusiveIf(0.5, 0.95, 0.99)(jct_s, fin) AS jct_q,
    maxIf(jct_s, fin) AS jct_max,
    countIf(started) AS queued, avgIf(wait_s, started) AS queue_mean,
    quantilesExactInclusiveIf(0.5, 0.95, 0.99)(wait_s, started) AS queue_q, maxIf(wait_s, started) AS queue_max,
    if(finished > 0, (maxIf(finish_ms, fin) - min(submit_ms)) / 1000, NULL) AS makespan_s,
    if(makespan_s > 0, finished / makespan_s, NULL) AS throughput_jobs_per_s,
    if(makespan_s > 0, sum(placements) / makespan_s, NULL) AS placement_rate_per_s
FROM (SELECT *, state = 'finished' AS fin, (finish_ms - submit_ms) / 1000 AS jct_s,
             (start_ms - submit_ms) / 1000 AS wait_s FROM ({jobs_sql(submit_filter)}))
GROUP BY grp ORDER BY grp
"""


def _dist(n: Any, mean: Any, q: Sequence[Any] | None, mx: Any) -> Distribution:
    n = int(n or 0)
    if n == 0:
        return Distribution(0, None, None, None, None, None)
    p50, p95, p99 = (_f(v) for v in (q or [None, None, None]))
    return Distribution(n, _f(mean), p50, p95, p99, _f(mx))


def job_metrics(client: ArchiveClient, group: Group = "all") -> dict[str, JobMetrics]:
    """:class:`~scheduling.metrics.JobMetrics` per group, all computed by ClickHouse."""
    out = {}
    for r in _dicts(client, job_metrics_sql(group)):
        out[r["grp"]] = JobMetrics(
            jobs=int(r["jobs"]), finished=int(r["finished"]), rejected=int(r["rejected"]),
            unfinished=int(r["unfinished"]),
            jct=_dist(r["finished"], r["jct_mean"], r["jct_q"], r["jct_max"]),
            queueing_delay=_dist(r["queued"], r["queue_mean"], r["queue_q"], r["queue_max"]),
            makespan_s=_f(r["makespan_s"]), throughput_jobs_per_s=_f(r["throughput_jobs_per_s"]),
            placement_rate_per_s=_f(r["placement_rate_per_s"]),
        )  # fmt: skip
    return out


# -- decisions: latency, step compute time ----------------------------------------------------

def _dist_sql(value: str, source: str, group: Group) -> str:
    return f"""
SELECT {_group(group)} AS grp, count() AS n, avg({value}) AS mean,
       quantilesExactInclusive(0.5, 0.95, 0.99)({value}) AS q, max({value}) AS mx
FROM ({source}) GROUP BY grp ORDER BY grp
"""


def decision_latency_sql(group: Group = "all", time_filter: str = "1") -> str:
    """Decision latency (ms) of placed decisions, per group."""
    src = f"SELECT {DECIDED_BY} AS policy, latency_ms FROM decisions_applied WHERE outcome = 'placed' AND {time_filter}"
    return _dist_sql("latency_ms", src, group)


def steps_sql(time_filter: str = "1") -> str:
    """One row per recorded scheduling step: (cluster, policy, compute ms, ``step_time``). A
    step is its ``step_id``; records from before it existed (empty) fall back to one step
    per distinct (cluster, policy, compute ms). A step is its policy's, or ``<policy> (fallback)``
    when any of its records fell back (a step whose model call failed places by the heuristic,
    and its waiting records say nothing of it: grouped by the record's own label, one step
    counted twice)."""
    return f"""
SELECT cluster, label AS policy, ms AS step_compute_ms, step_time FROM (
    SELECT cluster, if(max(fallback), concat(any(policy), '{FALLBACK_SUFFIX}'), any(policy)) AS label,
           any(step_compute_ms) AS ms, min(event_time) AS step_time,
           if(step_id != '', step_id, concat(policy, '/', toString(step_compute_ms))) AS step_key
    FROM decisions_applied WHERE step_compute_ms > 0 AND {time_filter}
    GROUP BY cluster, step_key)
"""


def step_compute_sql(group: Group = "all", time_filter: str = "1") -> str:
    """Compute time per scheduling step (ms), per group."""
    return _dist_sql("step_compute_ms", steps_sql(time_filter), group)


def _dists(client: ArchiveClient, sql: str) -> dict[str, Distribution]:
    return {r["grp"]: _dist(r["n"], r["mean"], r["q"], r["mx"]) for r in _dicts(client, sql)}


def decision_latency(client: ArchiveClient, group: Group = "all") -> dict[str, Distribution]:
    return _dists(client, decision_latency_sql(group))


def step_compute(client: ArchiveClient, group: Group = "all") -> dict[str, Distribution]:
    return _dists(client, step_compute_sql(group))


# -- placement stability ------------------------------------------------------------------------

#: One row per placement: whether it was reversed, by what, and when (see the module doc).
PLACEMENTS = f"""
SELECT p.cluster AS cluster, p.job_id AS job_id, p.attempt AS attempt, p.policy AS policy, p.event_time AS event_time,
       e.hard > 0 OR m.max_attempt > p.attempt AS reversed,
       if(reversed, if(e.cause = '', 'unknown', e.cause), '') AS cause,
       if(e.cause = '', NULL, e.t) AS reversed_at
FROM (SELECT cluster, job_id, attempt, {DECIDED_BY} AS policy, event_time FROM decisions_applied
      WHERE outcome = 'placed') AS p
LEFT JOIN (SELECT cluster, job_id, max(attempt) AS max_attempt FROM (
               SELECT cluster, job_id, attempt FROM decisions_applied
               UNION ALL SELECT cluster, job_id, attempt FROM jobs_lifecycle_applied) GROUP BY cluster, job_id) AS m
    ON p.cluster = m.cluster AND p.job_id = m.job_id
LEFT JOIN (SELECT x.cluster AS cluster, x.job_id AS job_id, x.attempt AS attempt, argMin(x.state, x.read_at) AS cause,
                  argMin(x.event_time, x.read_at) AS t, count() AS hard
           FROM (SELECT cluster, job_id, attempt, state, event_time,
                        (kafka_partition, kafka_offset, event_time) AS read_at
                 FROM jobs_lifecycle_applied WHERE state IN ('preempted', 'failed', 'timed_out')) AS x
           LEFT JOIN (SELECT cluster, job_id, attempt, min((kafka_partition, kafka_offset, event_time)) AS started_at,
                             1 AS has_start
                      FROM jobs_lifecycle_applied WHERE state = 'started' GROUP BY cluster, job_id, attempt) AS s
               ON x.cluster = s.cluster AND x.job_id = s.job_id AND x.attempt = s.attempt
           WHERE x.state != 'timed_out' OR ifNull(s.has_start, 0) = 0 OR x.read_at < s.started_at
           GROUP BY x.cluster, x.job_id, x.attempt) AS e
    ON p.cluster = e.cluster AND p.job_id = e.job_id AND p.attempt = e.attempt
"""


def stability_sql(group: Group = "all", time_filter: str = "1") -> str:
    """Placements, reversals (by cause) and placement stability, per group (placements by
    decision time)."""
    return f"""
SELECT {_group(group)} AS grp, count() AS placements, countIf(reversed) AS reversals,
       countIf(cause = 'preempted') AS preempted, countIf(cause = 'failed') AS failed,
       countIf(cause = 'timed_out') AS timed_out, countIf(cause = 'unknown') AS unknown,
       1 - least(reversals, placements) / placements AS placement_stability
FROM ({PLACEMENTS}) WHERE {time_filter} GROUP BY grp ORDER BY grp
"""


@dataclass(frozen=True)
class Stability:
    placements: int
    reversals: int
    reversals_by_cause: dict[str, int]
    placement_stability: float | None


def stability(client: ArchiveClient, group: Group = "all") -> dict[str, Stability]:
    return {
        r["grp"]: Stability(int(r["placements"]), int(r["reversals"]),
                            {c: int(r[c]) for c in ("preempted", "failed", "timed_out", "unknown") if r[c]},
                            _f(r["placement_stability"]))
        for r in _dicts(client, stability_sql(group))
    }  # fmt: skip


# -- GPU allocation -----------------------------------------------------------------------------

#: What each placement held and when: from its first ``started`` to its first end (finished /
#: failed / preempted), joined to its decision for the GPUs.
GPU_HOLDINGS = """
SELECT toUnixTimestamp64Milli(s) AS start_ms,
       if(isNull(e), NULL, toUnixTimestamp64Milli(assumeNotNull(e))) AS end_ms,
       toUInt32(d.gpu_milli_per_gpu) * length(d.gpu_indices) AS gpu_milli
FROM (
    SELECT cluster, job_id, attempt,
           minIf(event_time, state = 'started') AS s,
           if(countIf(state IN ('finished', 'failed', 'preempted')) > 0,
              minIf(event_time, state IN ('finished', 'failed', 'preempted')), NULL) AS e
    FROM jobs_lifecycle_applied
    GROUP BY cluster, job_id, attempt
    HAVING countIf(state = 'started') > 0
) AS l
INNER JOIN (SELECT cluster, job_id, attempt, gpu_milli_per_gpu, gpu_indices FROM decisions_applied
            WHERE outcome = 'placed') AS d
    ON l.cluster = d.cluster AND l.job_id = d.job_id AND l.attempt = d.attempt
"""

#: The cluster's GPU capacity (milli-GPU, every node's latest report) and the end of the run, which
#: bounds holdings still open when no range says otherwise: the last lifecycle event, or while a
#: holding is open the last event the archive holds (a decision or a telemetry report may come
#: later: the GPUs were still held then as far as the archive knows).
GPU_CAPACITY = f"""
SELECT sum(cap) AS capacity, toUnixTimestamp64Milli(if(
    (SELECT countIf(isNull(end_ms)) FROM ({GPU_HOLDINGS})) = 0, (SELECT max(event_time) FROM jobs_lifecycle_accepted),
    greatest((SELECT max(event_time) FROM jobs_lifecycle_accepted), (SELECT max(event_time) FROM decisions_applied),
             (SELECT max(event_time) FROM nodes_telemetry_accepted)))) AS end_ms
FROM (SELECT argMax(toUInt32(num_gpu) * 1000, event_time) AS cap FROM nodes_telemetry_accepted
      GROUP BY cluster, node_id)
"""


def gpu_allocation(client: ArchiveClient, bucket_s: float = 60.0) -> list[AllocationSample]:
    """GPU allocation over time (see :func:`scheduling.metrics.allocation_over_time`)."""
    holdings = [Holding(int(r["start_ms"]) / 1000, None if r["end_ms"] is None else int(r["end_ms"]) / 1000,
                        int(r["gpu_milli"])) for r in _dicts(client, GPU_HOLDINGS)]  # fmt: skip
    if not holdings:
        return []
    (cap,) = _dicts(client, GPU_CAPACITY)
    return allocation_over_time(holdings, int(cap["capacity"] or 0), bucket_s=bucket_s,
                                end=int(cap["end_ms"]) / 1000)  # fmt: skip


def gpu_allocation_sql(bucket_s: str = "60", lo_ms: str = "0", hi_ms: str | None = None) -> str:
    """:func:`scheduling.metrics.allocation_over_time` in SQL: per bucket of ``bucket_s``
    seconds (an expression), ``bucket_ms`` (epoch ms), ``allocated_milli`` (time-weighted
    mean) and ``ratio``; empty buckets are filled with 0. Only the buckets that meet
    ``[lo_ms, hi_ms]`` (expressions, epoch ms; default: the whole run) are computed — their
    values do not depend on the range, buckets are aligned on multiples of ``bucket_s``.

    Holdings still open end at ``hi_ms`` or now, whichever comes first, when a range is given (a
    live dashboard: they ended at the archive's last lifecycle event before, so a cluster whose jobs
    all ran on reads 0 %, and a range after that event failed the fill), else at the end of the run
    (``GPU_CAPACITY``); buckets without holdings up to there read 0."""
    stop = (f"toInt64(ifNull((SELECT end_ms FROM ({GPU_CAPACITY})), 0))" if hi_ms is None
            else f"least(toInt64({hi_ms}), toUnixTimestamp64Milli(now64(3)))")  # fmt: skip
    # where the zeros start: the first holding for the whole run (as allocation_over_time); with a range, the
    # cluster's first report, so idle buckets in the range before its first job read 0, not "no data" (found by
    # review: a range that ended before the first job came back empty, one before it lost its idle buckets)
    seen = ("" if hi_ms is None else
            "least(first_start, toInt64(ifNull((SELECT toUnixTimestamp64Milli(minOrNull(event_time)) "
            "FROM nodes_telemetry_accepted), first_start))), ")  # fmt: skip
    return f"""
WITH toInt64(({bucket_s}) * 1000) AS w, intDiv(toInt64({lo_ms}), w) * w AS lo,  -- the bucket of lo_ms
     (SELECT capacity FROM ({GPU_CAPACITY})) AS capacity,
     {stop} AS stop,
     toInt64(ifNull((SELECT minOrNull(start_ms) FROM ({GPU_HOLDINGS})), stop)) AS first_start,
     stop AS hi,
     intDiv(greatest({seen or "first_start, "}lo), w) * w AS fill_from
SELECT bucket_ms, allocated_milli, if(capacity > 0, allocated_milli / capacity, 0) AS ratio FROM (
    SELECT b AS bucket_ms,
           sum(greatest(0, least(e, least(b + w, stop)) - greatest(start_ms, b)) * gpu_milli)
               / (least(b + w, stop) - b) AS allocated_milli
    FROM (SELECT start_ms, ifNull(end_ms, stop) AS e, gpu_milli FROM ({GPU_HOLDINGS}))
    ARRAY JOIN arrayMap(i -> toInt64(i) * w,
                        range(intDiv(greatest(start_ms, lo), w), intDiv(least(e, hi), w) + 1)) AS b
    WHERE e > lo AND start_ms <= hi AND b < stop AND b + w > lo AND b <= hi
    GROUP BY b
    ORDER BY b WITH FILL FROM fill_from TO greatest(fill_from, stop) STEP w
) ORDER BY bucket_ms
"""


def gpu_allocation_in_sql(client: ArchiveClient, bucket_s: float = 60.0) -> list[AllocationSample]:
    """:func:`gpu_allocation`, computed by ClickHouse (:func:`gpu_allocation_sql`)."""
    (cap,) = _dicts(client, GPU_CAPACITY)
    return [AllocationSample(int(r["bucket_ms"]) / 1000, float(r["allocated_milli"]), int(cap["capacity"] or 0))
            for r in _dicts(client, gpu_allocation_sql(repr(float(bucket_s))))]  # fmt: skip


# -- dead letters -------------------------------------------------------------------------------

#: distinct original messages (topic, partition, offset) when the position is known, else events
DEADLETTER_KEY = ("if(topic_offset >= 0, concat(topic, ':', toString(topic_partition), ':', "
                  "toString(topic_offset)), event_id)")  # fmt: skip


def deadletters_sql(time_filter: str = "1") -> str:
    return f"""
SELECT reason, uniqExact({DEADLETTER_KEY}) AS messages
FROM deadletter FINAL WHERE {time_filter} GROUP BY reason ORDER BY messages DESC, reason
"""


def deadletters_by_reason(client: ArchiveClient) -> dict[str, int]:
    return {r["reason"]: int(r["messages"]) for r in _dicts(client, deadletters_sql())}


# -- everything ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class PolicyMetrics:
    """Every metric for one group of the archive (a policy, or ``all``)."""

    group: str
    jobs: JobMetrics
    decision_latency_ms: Distribution
    step_compute_ms: Distribution
    stability: Stability | None


def archive_metrics(client: ArchiveClient, group: Group = "all") -> dict[str, PolicyMetrics]:
    """Job metrics, decision latency, step compute time and stability, per group."""
    jobs, lat, steps, stab = (job_metrics(client, group), decision_latency(client, group),
                              step_compute(client, group), stability(client, group))  # fmt: skip
    empty = Distribution.of([])
    return {g: PolicyMetrics(g, jobs[g], lat.get(g, empty), steps.get(g, empty), stab.get(g)) for g in jobs}
