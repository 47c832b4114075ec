"""Every Grafana panel's SQL, one definition per panel (``dashboards/`` is generated from it).

The SQL uses the macros of the Grafana ClickHouse data source (grafana-clickhouse-datasource):
``$__timeFilter(col)``, ``$__fromTime``, ``$__toTime``, ``$__timeInterval(col)`` and
``$__interval_s``. :func:`expand_macros` substitutes them exactly as the plugin does (its
``pkg/macros``), so the tests run every panel on a chdb archive for a given time range.

Where a panel shows a metric of :mod:`scheduling.metrics`, its SQL is built from the
builders of :mod:`storage.queries.metrics` (the same SQL the agreement test checks), with
the dashboard's time range as the filter. Time-series panels return a ``time`` column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from scheduling.deadletter_classes import reason_class_sql
from storage.queries import metrics as m

Kind = Literal["timeseries", "table", "stat"]
Range = tuple[float | None, float | None]

RATIO: Range = (0.0, 1.0)
NONNEG: Range = (0.0, None)

#: dashboard uid → title
DASHBOARDS: dict[str, str] = {
    "semsched-utilisation": "semsched · cluster utilisation",
    "semsched-queue": "semsched · queue and JCT",
    "semsched-decisions": "semsched · decision latency",
    "semsched-policies": "semsched · policy comparison",
    "semsched-deadletters": "semsched · dead letters",
}


@dataclass(frozen=True)
class Panel:
    """One panel: ``id`` is stable (tests and the README name panels by it)."""

    id: str
    dashboard: str
    title: str
    kind: Kind
    sql: str
    unit: str = "short"
    description: str = ""
    #: column → allowed (min, max) of its values (``None`` = open); the panel test checks them
    ranges: dict[str, Range] = field(default_factory=dict)
    width: int = 12
    #: column → its unit, for a column not in the panel's ``unit`` (a count beside times): drawn on an
    #: axis of its own, on the right
    units: dict[str, str] = field(default_factory=dict)




def _flat(dist: str) -> str:
    """``<dist>_q`` arrays of :mod:`metrics` as scalar p50 / p95 / p99 columns."""
    return f"{dist}_q[1] AS {dist}_p50, {dist}_q[2] AS {dist}_p95, {dist}_q[3] AS {dist}_p99"


def _job_columns() -> str:
    return (f"jobs, finished, rejected, unfinished, jct_mean, {_flat('jct')}, queue_mean, {_flat('queue')}, "
            "makespan_s, throughput_jobs_per_s, placement_rate_per_s")  # fmt: skip


def _percentiles_over_time(value: str, time_col: str, source: str) -> str:
    return f"""
SELECT $__timeInterval({time_col}) AS time, avg({value}) AS mean,
       quantileExactInclusive(0.5)({value}) AS p50, quantileExactInclusive(0.95)({value}) AS p95,
       quantileExactInclusive(0.99)({value}) AS p99
FROM ({source}) WHERE $__timeFilter({time_col}) GROUP BY time ORDER BY time
"""


_FINISHED_JOBS = f"""
SELECT fromUnixTimestamp64Milli(finish_ms) AS finished_at, (finish_ms - submit_ms) / 1000 AS jct_s
FROM ({m.jobs_sql()}) WHERE state = 'finished'
"""
_STARTED_JOBS = f"""
SELECT fromUnixTimestamp64Milli(start_ms) AS started_at, (start_ms - submit_ms) / 1000 AS wait_s
FROM ({m.jobs_sql()}) WHERE started
"""

#: Each wait in the queue: attempt 0 from its submission, attempt a > 0 from the reversal of
#: attempt a - 1, until the placed / rejected decision (or the rejection) of that attempt, or the
#: job's first ``finished`` or ``rejected`` report from then on, whichever comes first (the run of an
#: attempt the worker had re-queued can finish after all: the job is done, nothing decides the wait).
_WAITS = f"""
SELECT since, multiIf(by_decision AND by_end, least(decided_at, ended_at), by_decision, decided_at, ended_at) AS until,
       by_decision OR by_end AS decided FROM (
    SELECT w.since AS since, ifNull(d.decided, 0) AS by_decision,  -- (NULL with join_use_nulls)
           assumeNotNull(d.until) AS decided_at, arrayFilter(t -> t >= w.since, f.ends) AS later_ends,
           notEmpty(later_ends) AS by_end, if(by_end, arrayMin(later_ends), w.since) AS ended_at
    FROM (
        SELECT cluster, job_id, toUInt16(0) AS attempt, min(event_time) AS since FROM jobs_submitted_accepted
        GROUP BY cluster, job_id
        UNION ALL
        SELECT cluster, job_id, toUInt16(attempt + 1) AS attempt, assumeNotNull(reversed_at) AS since
        FROM ({m.PLACEMENTS}) WHERE reversed AND reversed_at IS NOT NULL
    ) AS w
    LEFT JOIN (
        SELECT cluster, job_id, attempt, min(event_time) AS until, 1 AS decided FROM (
            SELECT cluster, job_id, attempt, event_time FROM decisions_applied WHERE outcome IN ('placed', 'rejected')
            UNION ALL SELECT cluster, job_id, attempt, event_time FROM jobs_lifecycle_applied WHERE state = 'rejected')
        GROUP BY cluster, job_id, attempt
    ) AS d ON w.cluster = d.cluster AND w.job_id = d.job_id AND w.attempt = d.attempt
    LEFT JOIN (  -- (an array is never NULL: empty when unmatched, with join_use_nulls or not)
        SELECT cluster, job_id, groupArray(event_time) AS ends FROM jobs_lifecycle_applied
        WHERE state IN ('finished', 'rejected') GROUP BY cluster, job_id
    ) AS f ON w.cluster = f.cluster AND w.job_id = f.job_id
)
"""

PANELS: list[Panel] = [
    # -- cluster utilisation ----------------------------------------------------------------
    Panel("utilisation.gpu_allocation", "semsched-utilisation", "GPU allocation (time-weighted)", "timeseries",
          f"""
SELECT fromUnixTimestamp64Milli(toInt64(bucket_ms)) AS time, ratio AS gpu_allocation
FROM ({m.gpu_allocation_sql("$__interval_s", "toUnixTimestamp($__fromTime) * 1000",
                            "toUnixTimestamp($__toTime) * 1000")})
ORDER BY time
""", unit="percentunit", ranges={"gpu_allocation": RATIO},
          description="Share of the cluster's GPU capacity (milli-GPU) held by placed jobs, time-weighted per "
                      "interval: scheduling.metrics.allocation_over_time in SQL."),  # fmt: skip
    Panel("utilisation.capacity", "semsched-utilisation", "Cluster capacity", "stat", """
SELECT count() AS nodes, sum(num_gpu) AS gpus, sum(cpu_milli) / 1000 AS cpus FROM (
    SELECT argMax(num_gpu, event_time) AS num_gpu, argMax(cpu_milli, event_time) AS cpu_milli
    FROM nodes_telemetry_accepted WHERE event_time <= $__toTime GROUP BY cluster, node_id)
""", ranges={"nodes": NONNEG, "gpus": NONNEG, "cpus": NONNEG}, width=6,
          description="Nodes and their GPUs and CPUs, from every node's latest telemetry."),  # fmt: skip
    Panel("utilisation.throughput", "semsched-utilisation", "Placements and finished jobs per second",
          "timeseries", """
SELECT time, series, value FROM (
    SELECT $__timeInterval(event_time) AS time, 'placed' AS series, count() / $__interval_s AS value
    FROM decisions_applied WHERE outcome = 'placed' AND $__timeFilter(event_time) GROUP BY time
    UNION ALL
    SELECT $__timeInterval(finished) AS time, 'finished' AS series, count() / $__interval_s AS value
    FROM (SELECT cluster, job_id, max(event_time) AS finished FROM jobs_lifecycle_applied
          WHERE state = 'finished' AND event_time <= $__toTime GROUP BY cluster, job_id)
    WHERE $__timeFilter(finished) GROUP BY time
) ORDER BY time, series
""", unit="suffix: jobs/s", ranges={"value": NONNEG}, width=18,
          description="Placement rate and throughput (jobs finished per second, each job once, at its last "
                      "finish: as the JCT counts it) per interval."),  # fmt: skip
    # -- queue and JCT ---------------------------------------------------------------------------
    Panel("queue.pending", "semsched-queue", "Pending jobs", "timeseries", f"""
SELECT toDateTime(b) AS time, countIf(since <= toDateTime64(b, 3) AND (decided = 0 OR until > toDateTime64(b, 3)))
       AS pending
FROM (SELECT arrayJoin(range(toUInt32(intDiv(toUnixTimestamp($__fromTime), $__interval_s) * $__interval_s),
                             toUInt32(toUnixTimestamp($__toTime)) + 1, toUInt32($__interval_s))) AS b) AS buckets
CROSS JOIN (SELECT * FROM ({_WAITS}) WHERE since <= $__toTime AND (decided = 0 OR until >= $__fromTime)) AS waits
GROUP BY b ORDER BY b
""", ranges={"pending": NONNEG},
          description="Jobs waiting for a placement at each instant (including re-queued ones)."),  # fmt: skip
    Panel("queue.jct", "semsched-queue", "JCT of the jobs finishing (s)", "timeseries",
          _percentiles_over_time("jct_s", "finished_at", _FINISHED_JOBS), unit="s",
          ranges={c: NONNEG for c in ("mean", "p50", "p95", "p99")},
          description="Job completion time = finish − submit, mean and percentiles per interval of finish time."),
    Panel("queue.queueing_delay", "semsched-queue", "Queueing delay of the jobs starting (s)", "timeseries",
          _percentiles_over_time("wait_s", "started_at", _STARTED_JOBS), unit="s",
          ranges={c: NONNEG for c in ("mean", "p50", "p95", "p99")},
          description="First start − submit, per interval of first start."),
    Panel("queue.summary", "semsched-queue", "Jobs submitted in the range", "table",
          f"SELECT {_job_columns()} FROM ({m.job_metrics_sql('all', '$__timeFilter(event_time)')})",
          ranges={"jobs": NONNEG, "jct_mean": NONNEG, "jct_p99": NONNEG, "queue_mean": NONNEG,
                  "makespan_s": NONNEG, "throughput_jobs_per_s": NONNEG}, width=24,
          description="scheduling.metrics.job_metrics over the jobs submitted in the range."),  # fmt: skip
    # -- decision latency --------------------------------------------------------------------------
    Panel("decisions.latency", "semsched-decisions", "Decision latency, submit → command (ms)", "timeseries", """
SELECT $__timeInterval(event_time) AS time, quantileExactInclusive(0.5)(latency_ms) AS p50,
       quantileExactInclusive(0.99)(latency_ms) AS p99
FROM decisions_applied WHERE outcome = 'placed' AND $__timeFilter(event_time) GROUP BY time ORDER BY time
""", unit="ms", ranges={"p50": NONNEG, "p99": NONNEG},
          description="decisions.latency_ms of placements (from submission, or re-queue)."),  # fmt: skip
    Panel("decisions.step_compute", "semsched-decisions", "Compute time per scheduling step (ms)", "timeseries",
          f"""
SELECT $__timeInterval(step_time) AS time, quantileExactInclusive(0.5)(step_compute_ms) AS p50,
       quantileExactInclusive(0.99)(step_compute_ms) AS p99, count() AS steps
FROM ({m.steps_sql('$__timeFilter(event_time)')}) GROUP BY time ORDER BY time
""", unit="ms", ranges={"p50": NONNEG, "p99": NONNEG, "steps": NONNEG}, units={"steps": "short"},
          description="Per recorded step (a step that wrote at least one decision), not per decision; the "
                      "number of steps on the right axis."),  # fmt: skip
    Panel("decisions.models", "semsched-decisions", "Placements by model version and fallback", "timeseries", """
SELECT $__timeInterval(event_time) AS time,
       if(fallback, concat('fallback (', if(model_version = '', 'no model', model_version), ')'),
          if(model_version = '', policy, model_version)) AS series, count() AS placements
FROM decisions_applied WHERE outcome = 'placed' AND $__timeFilter(event_time) GROUP BY time, series ORDER BY time, series
""", ranges={"placements": NONNEG},
          description="Which model version decided each placement, and the placements a failed model call "
                      "(Triton down, deadline missed) left to the fallback heuristic; heuristic policies "
                      "show under their name."),  # fmt: skip
    Panel("decisions.stability", "semsched-decisions", "Placement stability", "table",
          f"SELECT grp AS policy, placements, reversals, preempted, failed, timed_out, placement_stability "
          f"FROM ({m.stability_sql('policy', '$__timeFilter(event_time)')})",
          ranges={"placements": NONNEG, "reversals": NONNEG, "placement_stability": RATIO},
          description="Share of placements not reversed by preemption, failure re-queue or timeout."),
    # -- policy comparison -------------------------------------------------------------------------
    Panel("policies.jobs", "semsched-policies", "JCT and queueing delay by policy (s)", "table",
          f"SELECT grp AS policy, {_job_columns()} "
          f"FROM ({m.job_metrics_sql('policy', '$__timeFilter(event_time)')})",
          ranges={"jobs": NONNEG, "jct_mean": NONNEG, "jct_p95": NONNEG, "queue_mean": NONNEG}, width=24,
          description="Jobs submitted in the range, by the policy that decided them (placements a "
                      "model-backed policy left to its fallback heuristic: 'learned (fallback)')."),
    Panel("policies.latency", "semsched-policies", "Decision latency, step compute and stability by policy",
          "table", f"""
SELECT l.grp AS policy, l.q[1] AS latency_p50_ms, l.q[3] AS latency_p99_ms,
       -- no steps of its own: NULL (the array of an unmatched row reads 0, also with join_use_nulls)
       if(s.n > 0, s.q[1], NULL) AS step_p50_ms, if(s.n > 0, s.q[3], NULL) AS step_p99_ms,
       st.placement_stability AS placement_stability
FROM ({m.decision_latency_sql('policy', '$__timeFilter(event_time)')}) AS l
LEFT JOIN ({m.step_compute_sql('policy', '$__timeFilter(event_time)')}) AS s ON l.grp = s.grp
LEFT JOIN ({m.stability_sql('policy', '$__timeFilter(event_time)')}) AS st ON l.grp = st.grp
ORDER BY policy
""", ranges={"latency_p50_ms": NONNEG, "latency_p99_ms": NONNEG, "step_p50_ms": NONNEG,
             "placement_stability": RATIO}, width=24,
          description="Decision latency of each policy's placements, compute time of its own steps (empty "
                      "when it has none: a step where any record fell back counts under '<policy> (fallback)') "
                      "and placement stability."),  # fmt: skip
    Panel("policies.jct_p95", "semsched-policies", "JCT p95 by policy (s)", "timeseries", f"""
SELECT $__timeInterval(finished_at) AS time, policy, quantileExactInclusive(0.95)(jct_s) AS jct_p95
FROM (SELECT fromUnixTimestamp64Milli(finish_ms) AS finished_at, (finish_ms - submit_ms) / 1000 AS jct_s, policy
      FROM ({m.jobs_sql()}) WHERE state = 'finished')
WHERE $__timeFilter(finished_at) GROUP BY time, policy ORDER BY time, policy
""", unit="s", ranges={"jct_p95": NONNEG}, width=24),  # fmt: skip
    # -- dead letters --------------------------------------------------------------------------------
    # by class, as the worker's counter (scheduling/deadletter_classes.py): a reason names ids, one series each
    Panel("deadletters.over_time", "semsched-deadletters", "Dead letters by kind", "timeseries", f"""
SELECT $__timeInterval(event_time) AS time, {reason_class_sql()} AS kind, uniqExact({m.DEADLETTER_KEY}) AS messages
FROM deadletter FINAL WHERE $__timeFilter(event_time) GROUP BY time, kind ORDER BY time, kind
""", ranges={"messages": NONNEG}, width=24),  # fmt: skip
    Panel("deadletters.by_reason", "semsched-deadletters", "Dead letters in the range", "table",
          m.deadletters_sql("$__timeFilter(event_time)"), ranges={"messages": NONNEG}, width=24),
]

PANELS_BY_ID: dict[str, Panel] = {p.id: p for p in PANELS}
assert len(PANELS_BY_ID) == len(PANELS), "panel ids must be unique"


# -- the data source's macros ----------------------------------------------------------------

_MACRO = re.compile(r"\$__(\w+)(?:\(([^()]*)\))?")


def expand_macros(sql: str, start: datetime, end: datetime, interval_s: int) -> str:
    """Substitute the Grafana ClickHouse macros the way the plugin does (seconds precision for
    ``$__timeFilter`` / ``$__fromTime`` / ``$__toTime``; ``$__interval_s`` at least 1)."""
    f, t, iv = int(start.timestamp()), int(end.timestamp()), max(int(interval_s), 1)
    f_ms, t_ms = int(start.timestamp() * 1000), int(end.timestamp() * 1000)

    def one(mt: re.Match[str]) -> str:
        name, arg = mt.group(1), (mt.group(2) or "").strip()
        table = {
            "fromTime": f"toDateTime({f})", "toTime": f"toDateTime({t})",
            "fromTime_ms": f"fromUnixTimestamp64Milli({f_ms})", "toTime_ms": f"fromUnixTimestamp64Milli({t_ms})",
            "interval_s": str(iv),
            "timeFilter": f"{arg} >= toDateTime({f}) AND {arg} <= toDateTime({t})",
            "timeFilter_ms": f"{arg} >= fromUnixTimestamp64Milli({f_ms}) AND {arg} <= fromUnixTimestamp64Milli({t_ms})",
            "timeInterval": f"toStartOfInterval(toDateTime({arg}), INTERVAL {iv} second)",
        }  # fmt: skip
        if name not in table:
            raise ValueError(f"unknown macro $__{name}")
        return table[name]

    return _MACRO.sub(one, sql)
