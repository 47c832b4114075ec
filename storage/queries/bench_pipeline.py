"""The SQL of ``semsched bench pipeline``: what it reads back from the archive (through the
worker's ``/sql``) to measure a run. See ``ops/bench/pipeline.py`` for the definitions. Also
``bench archiver``'s one count (``ops/bench/archiver.py``)."""

from __future__ import annotations

TERMINAL = ("finished", "rejected")

#: Per job (a cluster and a job id: an id is unique only within a cluster), the moment the archive
#: first held its whole story — the submission, the decision, the command (unless the job was
#: rejected without one) and a terminal lifecycle row — then: how many jobs are complete, and when
#: the last of them became so.
COMPLETE = f"""
SELECT count(), max(t) FROM (
    SELECT cluster, job_id, max(t) AS t, groupUniqArray(k) AS ks FROM (
        SELECT cluster, job_id, min(archived_at) AS t, 'submitted' AS k FROM jobs_submitted GROUP BY cluster, job_id
        UNION ALL
        SELECT cluster, job_id, min(archived_at), 'decided' FROM decisions
        WHERE outcome IN ('placed', 'rejected') GROUP BY cluster, job_id
        UNION ALL
        SELECT cluster, assumeNotNull(job_id), min(archived_at), 'commanded' FROM actions
        WHERE kind = 'place' GROUP BY cluster, job_id
        UNION ALL
        SELECT cluster, job_id, min(archived_at), state FROM jobs_lifecycle WHERE state IN {TERMINAL!r}
        GROUP BY cluster, job_id, state
    ) GROUP BY cluster, job_id
) WHERE has(ks, 'submitted') AND has(ks, 'decided') AND (has(ks, 'finished') AND has(ks, 'commanded')
                                                         OR has(ks, 'rejected'))"""

#: per job: its first PlacementCommand's event time minus its (accepted) submission's, in ms (found by review:
#: every raw submission row was joined, so a refused re-submission of a job id added a second, negative value)
SUBMIT_TO_COMMAND_MS = """
SELECT toUnixTimestamp64Milli(a.t) - toUnixTimestamp64Milli(s.event_time)
FROM (SELECT cluster, job_id, min(event_time) AS event_time FROM jobs_submitted_accepted GROUP BY cluster, job_id) AS s
INNER JOIN (SELECT cluster, assumeNotNull(job_id) AS job_id, min(event_time) AS t FROM actions FINAL
            WHERE kind = 'place' GROUP BY cluster, job_id) AS a ON a.cluster = s.cluster AND a.job_id = s.job_id"""

#: ``bench archiver``: the submissions of one run in the archive, by the prefix of their job ids
SUBMITTED_WITH_PREFIX = ("SELECT uniqExact(cluster, job_id, event_id) FROM jobs_submitted "  # (events, not copies:
                         "WHERE startsWith(job_id, %(prefix)s)")  # each copy is a row since migration 0021)

FIRST_ATTEMPT_LATENCY_MS = "SELECT latency_ms FROM decisions_applied WHERE outcome = 'placed' AND attempt = 0"
#: per step that placed jobs (by its step id, as the archive's step metric: two steps with the very same float
#: compute time were one step before, found by review): its compute time and its placements
STEP_COMPUTE_MS = ("SELECT any(step_compute_ms), count() FROM decisions_applied WHERE outcome = 'placed' "
                   "GROUP BY cluster, if(step_id != '', step_id, concat(policy, '/', toString(step_compute_ms)))")  # fmt: skip
LIFECYCLE_STATES = "SELECT state, uniqExact(cluster, job_id, event_id) FROM jobs_lifecycle GROUP BY state ORDER BY state"
DECISION_OUTCOMES = "SELECT outcome, count() FROM decisions_applied GROUP BY outcome ORDER BY outcome"
RETRIED = "SELECT count(), uniqExact(cluster, job_id) FROM decisions_applied WHERE attempt > 0"
FINISHED_MORE_THAN_ONCE = ("SELECT count() FROM (SELECT cluster, job_id FROM jobs_lifecycle "
                           "WHERE state = 'finished' GROUP BY cluster, job_id HAVING uniqExact(event_id) > 1)")  # fmt: skip
TERMINAL_JOBS = f"SELECT uniqExact(cluster, job_id) FROM jobs_lifecycle FINAL WHERE state IN {TERMINAL!r}"


def ts(seconds: float) -> str:
    """A DateTime64(3) literal for epoch ``seconds``."""
    return f"toDateTime64({seconds:.3f}, 3, 'UTC')"


def rows_in_window(table: str, since: float, until: float, where: str = "") -> str:
    """Rows of ``table`` with an event time from ``since`` that were archived by ``until``: what the archive
    wrote, each copy of an event sent twice a row (a redelivery of one message counts once)."""
    extra = f" AND {where}" if where else ""
    return f"SELECT count() FROM {table} FINAL WHERE event_time >= {ts(since)} AND archived_at <= {ts(until)}{extra}"
