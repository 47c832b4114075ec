"""The SQL analysts, reports and the demo use, each as a function with a typed result.

Every read goes through ``FINAL`` so a redelivered event (same ``event_id``) counts once.
Times are selected as epoch milliseconds (``toUnixTimestamp64Milli``) and turned into
``datetime`` here, so the same SQL gives the same answer over chdb, a ClickHouse server,
or the worker's ``/sql`` endpoint (JSON). Quantiles use ``quantileExactInclusive``
(linear interpolation, the same as ``numpy.percentile``'s default).

Definitions:

- submitted / placed / finished / failed / rejected: distinct job ids with a
  submission / a ``placed`` decision / a ``finished`` / ``failed`` / ``rejected`` lifecycle
  event. running: jobs whose latest lifecycle event is ``started``.
- JCT = first ``finished`` event time − submission event time (jobs that finished).
- queueing delay = first ``started`` event time − submission event time.
- GPU allocation per minute, from node telemetry (the agents' own account of what they
  hold): for every node, its last report inside the minute; ratio = Σ allocated milli-GPU
  (Σ ``gpu_alloc_milli``) / Σ capacity (``num_gpu`` × 1000). Nodes that did not report in
  a minute are not counted in it, so the series is exact when agents report at least once
  a minute (inventory rows carry capacity and no allocation).
- decision latency: ``latency_ms`` of ``placed`` decisions (submit or tick → command).
- dead letters by reason: distinct original messages (topic, partition, offset) when the
  position is known, else distinct dead-letter events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from scheduling.metrics import AllocationSample, Holding, allocation_over_time
from storage.client import ArchiveClient

__all__ = [
    "Explanation",
    "Reconciliation",
    "Summary",
    "TimelineEntry",
    "explain",
    "reconcile",
    "run_sql",
    "summary",
]


def _dt(ms: Any) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(int(ms) / 1000, UTC)


def _f(x: Any) -> float | None:
    """A float, or None for NULL / NaN (ClickHouse aggregates over nothing give NaN)."""
    if x is None:
        return None
    v = float(x)
    return None if v != v else v


def _dicts(client: ArchiveClient, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    cols, rows = client.query_rows(sql, params)
    return [dict(zip(cols, r, strict=True)) for r in rows]


def run_sql(client: ArchiveClient, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Any query (for ``semsched sql``): column names and rows."""
    return client.query_rows(sql)


# --------------------------------------------------------------------------- summary


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

# Jobs with an attempt that started and has not ended, and no final state: by the events
# themselves, not their order (a start and an end can share a millisecond).
_RUNNING = """
SELECT job_id FROM jobs_lifecycle FINAL GROUP BY job_id, attempt
HAVING countIf(state = 'started') > 0
   AND countIf(state IN ('finished', 'failed', 'preempted', 'rejected')) = 0
   AND job_id NOT IN (SELECT job_id FROM jobs_lifecycle FINAL WHERE state IN ('finished', 'rejected'))
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


# --------------------------------------------------------------------------- reconcile


@dataclass(frozen=True)
class Reconciliation:
    #: submitted, but neither finished, running, nor rejected with a reason
    unaccounted: list[str]
    #: (job_id, attempt) placed more than once: two decision ids or two nodes for one attempt
    placed_twice: list[tuple[str, int]]
    #: (job_id, attempt) with more than one distinct ``started`` event
    started_twice: list[tuple[str, int]]

    @property
    def ok(self) -> bool:
        return not (self.unaccounted or self.placed_twice or self.started_twice)


_UNACCOUNTED = """
SELECT DISTINCT job_id FROM jobs_submitted FINAL
WHERE job_id NOT IN (SELECT job_id FROM jobs_lifecycle FINAL WHERE state = 'finished')
  AND job_id NOT IN (SELECT job_id FROM jobs_lifecycle FINAL WHERE state = 'rejected' AND reason != '')
  AND job_id NOT IN (__RUNNING__)
ORDER BY job_id
"""
_UNACCOUNTED = _UNACCOUNTED.replace("__RUNNING__", _RUNNING)

# Not FINAL on purpose: a re-decision of one attempt carries the same event_id (=
# decision_id), so FINAL would collapse two different placements into one row. Raw rows
# include redeliveries, which are identical (same decision id, same node) and so harmless.
_PLACED_TWICE = """
SELECT job_id, attempt FROM (
    SELECT job_id, attempt, decision_id, node_id FROM decisions WHERE outcome = 'placed'
    UNION ALL
    SELECT assumeNotNull(job_id), assumeNotNull(attempt), decision_id, toNullable(toString(node_id))
    FROM actions WHERE kind = 'place'
)
GROUP BY job_id, attempt
HAVING uniqExact(decision_id) > 1 OR uniqExact(node_id) > 1
ORDER BY job_id, attempt
"""

_STARTED_TWICE = """
SELECT job_id, attempt FROM jobs_lifecycle FINAL WHERE state = 'started'
GROUP BY job_id, attempt HAVING count() > 1 ORDER BY job_id, attempt
"""


def reconcile(client: ArchiveClient) -> Reconciliation:
    """Jobs the system lost track of, and jobs placed or started twice."""
    _, unacc = client.query_rows(_UNACCOUNTED)
    _, placed = client.query_rows(_PLACED_TWICE)
    _, started = client.query_rows(_STARTED_TWICE)
    return Reconciliation(
        unaccounted=[r[0] for r in unacc],
        placed_twice=[(r[0], int(r[1])) for r in placed],
        started_twice=[(r[0], int(r[1])) for r in started],
    )


# --------------------------------------------------------------------------- explain


@dataclass(frozen=True)
class TimelineEntry:
    time: datetime
    source: str  # "submitted" | "decision" | "action" | "lifecycle"
    text: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Explanation:
    job_id: str
    submission: dict[str, Any] | None
    decisions: list[dict[str, Any]]
    lifecycle: list[dict[str, Any]]
    timeline: list[TimelineEntry]
    answer: str


_SUBMISSION = """
SELECT job_id, cluster, tenant, user, priority, qos, cpu_milli, memory_mib, num_gpu, gpu_milli,
       gpu_models, gang_id, gang_size, name, toUnixTimestamp64Milli(event_time) AS t_ms
FROM jobs_submitted FINAL WHERE job_id = %(job)s ORDER BY event_time LIMIT 1
"""

_DECISIONS = """
SELECT decision_id, attempt, outcome, node_id, gpu_indices, policy, model_version, candidates,
       feasible_nodes, predicted_duration_s, predicted_cost, latency_ms, reason, fallback,
       toUnixTimestamp64Milli(event_time) AS t_ms
FROM decisions FINAL WHERE job_id = %(job)s ORDER BY event_time, event_id
"""

_ACTIONS = """
SELECT kind, decision_id, node_id, reason, toUnixTimestamp64Milli(event_time) AS t_ms
FROM actions FINAL WHERE job_id = %(job)s ORDER BY event_time, event_id
"""

_LIFECYCLE = """
SELECT state, attempt, node_id, exit_code, reason, log_tail, toUnixTimestamp64Milli(event_time) AS t_ms
FROM jobs_lifecycle FINAL WHERE job_id = %(job)s ORDER BY event_time, event_id
"""


def _candidates_text(cands: list[Any], n: int = 3) -> str:
    parts = []
    for c in cands[:n]:
        node, score = (c["node_id"], c["score"]) if isinstance(c, dict) else (c[0], c[1])
        parts.append(f"{node} ({float(score):.3g})")
    return ", ".join(parts)


def _answer(
    job_id: str, sub: dict[str, Any] | None, decs: list[dict[str, Any]], life: list[dict[str, Any]]
) -> str:
    if sub is None and not decs and not life:
        return f"Job {job_id} is not in the archive: no submission, decision or lifecycle event."
    last_life = life[-1] if life else None
    placed = [d for d in decs if d["outcome"] == "placed"]
    last_dec = decs[-1] if decs else None
    where = ""
    if placed:
        p = placed[-1]
        why = f" because {p['reason']}" if p["reason"] else ""
        cands = _candidates_text(p["candidates"] or [])
        top = f" (top candidates: {cands}; {p['feasible_nodes']} feasible nodes)" if cands else ""
        fb = " (heuristic fallback: the configured scorer failed)" if p["fallback"] else ""
        mv = f" model {p['model_version']}" if p["model_version"] else ""
        where = f"placed on node {p['node_id']} by policy {p['policy']}{mv}{why}{top}{fb}"
    if last_life is not None:
        state, t = last_life["state"], last_life["time"].isoformat()
        node = last_life["node_id"] or (placed[-1]["node_id"] if placed else "?")
        if state == "finished":
            jct = ""
            if sub is not None:
                jct = f" (JCT {(last_life['time'] - sub['time']).total_seconds():.1f}s)"
            return f"Job {job_id} finished on node {node} at {t}{jct}; it was {where or 'placed'}."
        if state == "rejected":
            return f"Job {job_id} was rejected at {t}: {last_life['reason'] or 'no reason recorded'}."
        if state == "started":
            return f"Job {job_id} is running on node {node} since {t}; it was {where or 'placed'}."
        if state in ("failed", "preempted", "timed_out") and (
            last_dec is None or last_dec["time"] <= last_life["time"]
        ):
            extra = f" (exit code {last_life['exit_code']})" if last_life["exit_code"] is not None else ""
            reason = f": {last_life['reason']}" if last_life["reason"] else ""
            return (
                f"Job {job_id} {state.replace('_', ' ')} on node {node} at {t}{extra}{reason}; "
                f"it is waiting to be re-placed (attempt {int(last_life['attempt']) + 1})."
            )
    if last_dec is not None and last_dec["outcome"] == "placed":
        return f"Job {job_id} was {where}; no agent has confirmed the start yet."
    if last_dec is not None:
        reason = last_dec["reason"] or "no reason recorded"
        return (
            f"Job {job_id} is pending because {reason} (policy {last_dec['policy']}, "
            f"{last_dec['feasible_nodes']} feasible nodes, last tried {last_dec['time'].isoformat()}, "
            f"{len(decs)} decision(s) so far)."
        )
    since = f" since {sub['time'].isoformat()}" if sub is not None else ""
    return f"Job {job_id} is pending{since}: no scheduling decision has been recorded for it yet."


def explain(client: ArchiveClient, job_id: str) -> Explanation:
    """Everything the archive knows about one job, in time order, and a human answer to
    "why is it pending / why did it land there"."""
    p = {"job": job_id}
    subs = _dicts(client, _SUBMISSION, p)
    decs = _dicts(client, _DECISIONS, p)
    acts = _dicts(client, _ACTIONS, p)
    life = _dicts(client, _LIFECYCLE, p)
    for rows in (subs, decs, acts, life):
        for r in rows:
            r["time"] = _dt(r.pop("t_ms"))
    sub = subs[0] if subs else None
    timeline: list[TimelineEntry] = []
    if sub is not None:
        gpu = f", {sub['num_gpu']} GPU" if sub["num_gpu"] else ""
        timeline.append(TimelineEntry(sub["time"], "submitted",
                                      f"submitted by {sub['user'] or sub['tenant']} to {sub['cluster']}: "
                                      f"{sub['cpu_milli']}m CPU, {sub['memory_mib']} MiB{gpu}, "
                                      f"priority {sub['priority']} {sub['qos']}", sub))  # fmt: skip
    for d in decs:
        cands = _candidates_text(d["candidates"] or [])
        head = f"placed on {d['node_id']}" if d["outcome"] == "placed" else "not placed"
        text = f"{head} by {d['policy']} (attempt {d['attempt']}, {d['latency_ms']:.1f} ms)"
        if d["reason"]:
            text += f": {d['reason']}"
        if cands:
            text += f"; candidates {cands}"
        timeline.append(TimelineEntry(d["time"], "decision", text, d))
    for a in acts:
        timeline.append(TimelineEntry(a["time"], "action", f"{a['kind']} → {a['node_id']}", a))
    for e in life:
        text = f"{e['state']}" + (f" on {e['node_id']}" if e["node_id"] else "")
        if e["exit_code"] is not None:
            text += f" (exit {e['exit_code']})"
        if e["reason"]:
            text += f": {e['reason']}"
        timeline.append(TimelineEntry(e["time"], "lifecycle", text, e))
    order = {"submitted": 0, "decision": 1, "action": 2, "lifecycle": 3}
    timeline.sort(key=lambda x: (x.time, order[x.source]))
    return Explanation(job_id, sub, decs, life, timeline, _answer(job_id, sub, decs, life))
