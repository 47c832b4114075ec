"""The SQL analysts, reports and the demo use, each as a function with a typed result.

Every read counts a redelivered event (same ``event_id``) once (``FINAL``, or a view that keeps one
row per event), and reads the submissions, telemetry and lifecycle reports through the ``*_accepted`` views
(``storage/migrations/0014_accepted_events.sql``): an event the worker refused on its own state
(a clock far ahead, a job id in use) is archived too, and counts nowhere as accepted (one row per
event: its first copy not refused, since ``0020_accepted_first_copy.sql``); the lifecycle
through ``jobs_lifecycle_applied`` (``0018_lifecycle_applied.sql``: the reports of the node each
attempt runs on, without a fenced second execution's); and the
decisions through ``decisions_applied`` (``0016_decisions_applied.sql``: the first record of each
decision id in the topic, the one the worker applied; ``decisions`` keeps every record, a re-decided
attempt's too, one row per record since ``0017_decisions_by_record.sql``). A job id, and so its
decision id, is unique only within a cluster (two clusters on two workers may share one): the views
(since ``0019_archive_by_cluster.sql``) and every read key jobs, attempts and decisions by cluster too.
Reconciliation reads the raw rows, for the reason given there.
Times are selected as epoch milliseconds (``toUnixTimestamp64Milli``) and turned into
``datetime`` here, so the same SQL gives the same answer over chdb, a ClickHouse server,
or the worker's ``/sql`` endpoint (JSON). Quantiles use ``quantileExactInclusive``
(linear interpolation, the same as ``numpy.percentile``'s default).

Definitions:

- submitted / placed: distinct jobs (cluster and job id) with a submission / a ``placed``
  decision; finished: submitted jobs with a ``finished`` event, rejected: those with a ``rejected``
  lifecycle event and none ``finished`` (both as :func:`storage.queries.metrics.job_metrics`); failed: distinct (job, attempt) with a
  ``failed`` event (failed attempts).
  running: jobs whose latest lifecycle event is ``started``; refused: submission messages dead-lettered
  with a reason (not for an internal error: applied again), so submitted + refused is every submission
  the archive accounts for (the demo compares it with what its replay sent).
- JCT = last ``finished`` event time − first submission event time (jobs that finished).
- queueing delay = first ``started`` event time − submission event time.
- GPU allocation over time: what each placement held from its first ``started`` to its first
  end, as a time-weighted share of the cluster's GPU capacity per bucket
  (``scheduling.metrics.allocation_over_time``).
- decision latency: ``latency_ms`` of ``placed`` decisions (submit or tick → command).
- every metric of ``scheduling/metrics`` (JCT, queueing delay, makespan, throughput, placement
  rate, decision latency, step compute time, placement stability, GPU allocation), overall or
  per policy: :mod:`storage.queries.metrics`; the dashboards' panels: :mod:`storage.queries.panels`.
- dead letters by reason: distinct original messages (topic, partition, offset) when the
  position is known, else distinct dead-letter events.
"""

# Re-exports: the public API, plus the private names other code imports (helpers, and the
# reconciliation's own SQL, which tests/integration reuses).
from storage.queries._common import _RUNNING as _RUNNING
from storage.queries._common import WORKER_SQL_LIMITS, run_sql
from storage.queries._common import _dicts as _dicts
from storage.queries._common import _dt as _dt
from storage.queries._common import _f as _f
from storage.queries.explain import AmbiguousJob, Explanation, TimelineEntry, explain, job_clusters
from storage.queries.metrics import PolicyMetrics, Stability, archive_metrics, gpu_allocation
from storage.queries.outcomes import job_outcomes
from storage.queries.reconcile import _PLACED_TWICE as _PLACED_TWICE
from storage.queries.reconcile import _STARTED_TWICE as _STARTED_TWICE
from storage.queries.reconcile import _UNACCOUNTED as _UNACCOUNTED
from storage.queries.reconcile import Reconciliation, reconcile
from storage.queries.summary import Summary, summary

__all__ = [
    "AmbiguousJob",
    "Explanation",
    "PolicyMetrics",
    "Stability",
    "archive_metrics",
    "gpu_allocation",
    "job_outcomes",
    "Reconciliation",
    "Summary",
    "TimelineEntry",
    "explain",
    "job_clusters",
    "reconcile",
    "run_sql",
    "WORKER_SQL_LIMITS",
    "summary",
]
