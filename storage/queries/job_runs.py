"""Every run of the archive's jobs, finished or not: what a duration model trained at a cut knows
of the jobs still running at it (``semsched train-duration --trace archive``).

:func:`job_runs` gives one row per attempt that started: the job's first submission (as
:mod:`storage.queries.finished_jobs` reads it), when the attempt started (its latest
``started``, as ``finished_jobs`` times a run) and when it ended, for any reason — its first
``finished``, ``failed`` or ``preempted`` from that start on, ``None`` while it runs. A
``timed_out`` is no end: the worker keeps a run that reported ``started``. A model trained at a
cut learns the attempts running at it as lower bounds on their run time
(:func:`inference.duration.evaluate.running_at_cut`) — chosen by what was running then, not by
what finished later. Both tables are read with ``FINAL`` (redeliveries count once).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.events import JobSubmitted
from storage.client import ArchiveClient
from storage.queries._common import _dicts
from storage.queries.finished_jobs import SUBMISSION_COLUMNS, first_submissions, submission_of

ENDS = ("finished", "failed", "preempted")  # what ends a run that started


def job_runs_sql(cluster: str | None = None) -> str:
    ends = ", ".join(f"'{e}'" for e in ENDS)
    return f"""
SELECT {SUBMISSION_COLUMNS}, toUnixTimestamp64Milli(a.start) AS start_ms, a.end_ms AS end_ms
FROM {first_submissions(cluster)} AS s
INNER JOIN (
    SELECT st.cluster AS cluster, st.job_id AS job_id, st.attempt AS attempt, st.start AS start,
           if(countIf(e.ended >= st.start) > 0, toUnixTimestamp64Milli(minIf(e.ended, e.ended >= st.start)),
              NULL) AS end_ms
    FROM (SELECT cluster, job_id, attempt, max(event_time) AS start FROM jobs_lifecycle_applied
          WHERE state = 'started' GROUP BY cluster, job_id, attempt) AS st
    LEFT JOIN (SELECT cluster, job_id, attempt, event_time AS ended FROM jobs_lifecycle_applied
               WHERE state IN ({ends})) AS e
    ON st.cluster = e.cluster AND st.job_id = e.job_id AND st.attempt = e.attempt
    GROUP BY st.cluster, st.job_id, st.attempt, st.start
) AS a ON s.cluster = a.cluster AND s.job_id = a.job_id
ORDER BY submit_ms, cluster, job_id, start_ms
SETTINGS join_use_nulls = 1
"""


@dataclass(frozen=True)
class JobRun:
    """One attempt of a job that started: its first submission, and when the attempt ran (epoch s)."""

    submission: JobSubmitted
    submit_s: float
    started_s: float
    ended_s: float | None  # None: still running at the archive's end


def job_runs(client: ArchiveClient, cluster: str | None = None) -> list[JobRun]:
    """Every attempt that started, oldest submission first (``cluster``: only that cluster's)."""
    out = []
    for r in _dicts(client, job_runs_sql(cluster), {"cluster": cluster} if cluster is not None else None):
        event, submit = submission_of(r)
        end = r["end_ms"]
        out.append(JobRun(event, submit, int(r["start_ms"]) / 1000, None if end is None else int(end) / 1000))
    return out
