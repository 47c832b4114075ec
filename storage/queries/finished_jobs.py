"""Finished jobs and their run times: what a duration predictor learns from in production.

:func:`finished_jobs` joins ``jobs_submitted`` (the job's first submission) with
``jobs_lifecycle``: the **run time** of a job is that of its last finished attempt —
``finished`` minus the latest ``started`` of the same attempt (what the worker's predictor
observes, :mod:`streams.agents`). Jobs that never finished (running, failed, rejected) are not
returned. Both tables are read with ``FINAL`` (redeliveries count once). ``latest=N`` gives the
N jobs that finished last instead, oldest finish first: what a worker's duration estimate learns
at start (:mod:`streams.duration_warm_up`).

The submission's ``trace_duration_s`` column is **not selected**: it is the answer a replayed
trace carries for the simulated agents, never a feature. Training on the rows is
:func:`inference.duration.archive.train_from_finished` (``ops`` passes them in).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from scheduling.events import JobSubmitted
from storage.client import ArchiveClient
from storage.queries._common import _dicts

#: a job's first submission (``s``), every column a feature may read; never ``trace_duration_s``
SUBMISSION_COLUMNS = """s.event_id AS event_id, toUnixTimestamp64Milli(s.event_time) AS submit_ms, s.job_id AS job_id,
       s.cluster AS cluster, s.tenant AS tenant, s.user AS user, s.priority AS priority, s.qos AS qos,
       s.cpu_milli AS cpu_milli, s.memory_mib AS memory_mib, s.num_gpu AS num_gpu, s.gpu_milli AS gpu_milli,
       s.gpu_models AS gpu_models, s.gang_id AS gang_id, s.gang_size AS gang_size, s.app AS app,
       s.max_instances_per_node AS max_instances_per_node, s.name AS name, s.command AS command,
       s.labels AS labels, s.runtime_estimate_s AS runtime_estimate_s"""


def first_submissions(cluster: str | None = None) -> str:
    """The subquery of each job's first accepted submission, per cluster and job id (a job id is unique
    only within a cluster; ``cluster``: ``%(cluster)s``'s only)."""
    where = "" if cluster is None else "WHERE cluster = %(cluster)s"
    return f"""(SELECT * EXCEPT (trace_duration_s) FROM jobs_submitted_accepted {where}
      ORDER BY event_time, event_id LIMIT 1 BY cluster, job_id)"""


def submission_of(r: dict) -> tuple[JobSubmitted, float]:
    """A row's first submission (``trace_duration_s`` unset) and its time, epoch s (:data:`SUBMISSION_COLUMNS`)."""
    submit = int(r["submit_ms"]) / 1000
    event = JobSubmitted.model_construct(
        event_id=r["event_id"], event_time=datetime.fromtimestamp(submit, UTC), job_id=r["job_id"],
        cluster=r["cluster"], tenant=r["tenant"], user=r["user"] or "", priority=int(r["priority"]), qos=r["qos"],
        cpu_milli=int(r["cpu_milli"]), memory_mib=int(r["memory_mib"]), num_gpu=int(r["num_gpu"]),
        gpu_milli=int(r["gpu_milli"]), gpu_models=list(r["gpu_models"] or []), gang_id=r["gang_id"],
        gang_size=int(r["gang_size"]), app=r["app"], max_instances_per_node=r["max_instances_per_node"],
        name=r["name"] or "", command=r["command"] or "", labels=dict(r["labels"] or {}),
        runtime_estimate_s=r["runtime_estimate_s"], trace_duration_s=None)  # fmt: skip
    return event, submit


def finished_jobs_sql(cluster: str | None = None, *, latest: int | None = None, timeout_s: float | None = None) -> str:
    """One row per finished job, oldest submission first; with ``latest``, the ``latest`` jobs that
    finished last, oldest finish first (``%(latest)s``); ``timeout_s``: the query's ``max_execution_time``."""
    order = "submit_ms, cluster, job_id" if latest is None else "finish_ms DESC, cluster DESC, job_id DESC LIMIT %(latest)s"
    sql = f"""
SELECT {SUBMISSION_COLUMNS}, r.run_s AS run_s, toUnixTimestamp64Milli(r.last_finish) AS finish_ms
FROM {first_submissions(cluster)} AS s
INNER JOIN (
    SELECT cluster, job_id, argMax(run_s, finish) AS run_s, max(finish) AS last_finish FROM (
        SELECT f.cluster AS cluster, f.job_id AS job_id, f.finish AS finish,
               (toUnixTimestamp64Milli(f.finish) - toUnixTimestamp64Milli(st.start)) / 1000 AS run_s
        FROM (SELECT cluster, job_id, attempt, max(event_time) AS finish FROM jobs_lifecycle_applied
              WHERE state = 'finished' GROUP BY cluster, job_id, attempt) AS f
        INNER JOIN (SELECT cluster, job_id, attempt, max(event_time) AS start FROM jobs_lifecycle_applied
                    WHERE state = 'started' GROUP BY cluster, job_id, attempt) AS st
        ON f.cluster = st.cluster AND f.job_id = st.job_id AND f.attempt = st.attempt
        WHERE f.finish >= st.start)
    GROUP BY cluster, job_id) AS r ON s.cluster = r.cluster AND s.job_id = r.job_id
ORDER BY {order}
"""
    sql = sql if latest is None else f"SELECT * FROM ({sql}) ORDER BY finish_ms, cluster, job_id"
    return sql if timeout_s is None else f"{sql} SETTINGS max_execution_time = {max(1, round(timeout_s))}"


@dataclass(frozen=True)
class FinishedJob:
    """A job's first submission (``trace_duration_s`` left unset) and its run time."""

    submission: JobSubmitted
    submit_s: float  # epoch s of the submission
    run_s: float  # the last finished attempt's run time (>= 0)
    finish_s: float  # epoch s of that attempt's finish


def finished_jobs(client: ArchiveClient, cluster: str | None = None, *, latest: int | None = None,
                  timeout_s: float | None = None) -> list[FinishedJob]:  # fmt: skip
    """The archive's finished jobs, oldest submission first (``cluster``: only that cluster's); with
    ``latest``, only the ``latest`` that finished last, oldest finish first (a worker's warm-up);
    ``timeout_s``: the server gives up after that long (an error, not a partial answer)."""
    if latest is not None and latest < 1:
        raise ValueError(f"latest must be at least 1, not {latest}")
    params: dict[str, object] = ({"cluster": cluster} if cluster is not None else {}) | ({"latest": latest} if latest else {})
    out = []
    for r in _dicts(client, finished_jobs_sql(cluster, latest=latest, timeout_s=timeout_s), params or None):
        event, submit = submission_of(r)
        out.append(FinishedJob(event, submit, max(0.0, float(r["run_s"])), int(r["finish_ms"]) / 1000))
    return out
