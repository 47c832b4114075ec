"""Finished jobs from the ClickHouse archive: what a duration predictor learns from in production.

:func:`finished_jobs_sql` joins ``jobs_submitted`` (the job's first submission) with
``jobs_lifecycle``: the **run time** of a job is that of its last finished attempt —
``finished`` minus the latest ``started`` of the same attempt (what the worker's predictor
observes, :mod:`streams.agents`). Jobs that never finished (running, failed, rejected) are not
returned. Both tables are read with ``FINAL`` (redeliveries count once).

The submission's ``trace_duration_s`` column is **not selected**: it is the answer a replayed
trace carries for the simulated agents, never a feature.

:func:`train_from_archive` trains a predictor on them, split in time by the submission time
(:func:`inference.duration.train.train_predictor` with ``submit_times``). The client is any
:class:`storage.client.ArchiveClient` (chdb embedded, a ClickHouse server, or the worker's
read-only ``/sql`` endpoint: ``ops.cli.db.WorkerSqlClient``) — only ``query_rows`` is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inference.duration.config import DurationConfig
from inference.duration.predictor import LearnedDurationPredictor
from inference.encoders.base import TextEncoder
from scheduling.events import JobSubmitted
from scheduling.job import JobRequest

COLUMNS = ("job_id", "submit_s", "cluster", "tenant", "user", "priority", "qos", "cpu_milli", "memory_mib", "num_gpu",
           "gpu_milli", "gpu_models", "gang_id", "gang_size", "app", "max_instances_per_node", "name", "command",
           "labels", "runtime_estimate_s", "run_s")  # fmt: skip


def finished_jobs_sql(cluster: str | None = None) -> str:
    """One row per finished job (columns :data:`COLUMNS`), oldest submission first."""
    where = "" if cluster is None else "WHERE cluster = %(cluster)s"
    return f"""
SELECT s.job_id AS job_id, toUnixTimestamp64Milli(s.event_time) / 1000 AS submit_s, s.cluster AS cluster,
       s.tenant AS tenant, s.user AS user, s.priority AS priority, s.qos AS qos, s.cpu_milli AS cpu_milli,
       s.memory_mib AS memory_mib, s.num_gpu AS num_gpu, s.gpu_milli AS gpu_milli, s.gpu_models AS gpu_models,
       s.gang_id AS gang_id, s.gang_size AS gang_size, s.app AS app,
       s.max_instances_per_node AS max_instances_per_node, s.name AS name, s.command AS command,
       s.labels AS labels, s.runtime_estimate_s AS runtime_estimate_s, r.run_s AS run_s
FROM (SELECT * EXCEPT (trace_duration_s) FROM jobs_submitted FINAL {where}
      ORDER BY event_time, event_id LIMIT 1 BY job_id) AS s
INNER JOIN (
    SELECT job_id, argMax(run_s, finish) AS run_s FROM (
        SELECT f.job_id AS job_id, f.finish AS finish,
               (toUnixTimestamp64Milli(f.finish) - toUnixTimestamp64Milli(st.start)) / 1000 AS run_s
        FROM (SELECT job_id, attempt, max(event_time) AS finish FROM jobs_lifecycle FINAL
              WHERE state = 'finished' GROUP BY job_id, attempt) AS f
        INNER JOIN (SELECT job_id, attempt, max(event_time) AS start FROM jobs_lifecycle FINAL
                    WHERE state = 'started' GROUP BY job_id, attempt) AS st
        ON f.job_id = st.job_id AND f.attempt = st.attempt
        WHERE f.finish >= st.start)
    GROUP BY job_id) AS r ON s.job_id = r.job_id
ORDER BY submit_s, job_id
"""


@dataclass
class ArchivedJob:
    job: JobRequest
    submit_s: float
    run_s: float


def finished_jobs(client: Any, cluster: str | None = None) -> list[ArchivedJob]:
    """The archive's finished jobs as requests (``submit_time`` = epoch seconds), oldest first."""
    cols, rows = client.query_rows(finished_jobs_sql(cluster), {"cluster": cluster} if cluster else None)
    out = []
    for row in rows:
        r = dict(zip(cols, row, strict=True))
        event = JobSubmitted(
            job_id=r["job_id"], cluster=r["cluster"], tenant=r["tenant"], user=r["user"] or "",
            priority=int(r["priority"]), qos=r["qos"], cpu_milli=int(r["cpu_milli"]),
            memory_mib=int(r["memory_mib"]), num_gpu=int(r["num_gpu"]), gpu_milli=int(r["gpu_milli"]),
            gpu_models=list(r["gpu_models"] or []), gang_id=r["gang_id"], gang_size=int(r["gang_size"]),
            app=r["app"], max_instances_per_node=r["max_instances_per_node"], name=r["name"] or "",
            command=r["command"] or "", labels=dict(r["labels"] or {}), runtime_estimate_s=r["runtime_estimate_s"],
        )  # fmt: skip
        submit = float(r["submit_s"])
        out.append(ArchivedJob(JobRequest.from_event(event, submit_time=submit), submit, max(0.0, float(r["run_s"]))))
    return out


def train_from_archive(client: Any, config: DurationConfig | None = None, *, cluster: str | None = None,
                       encoder: TextEncoder | None = None, **kwargs: Any) -> LearnedDurationPredictor:  # fmt: skip
    """A predictor trained (and indexed) on the archive's finished jobs; ``kwargs`` go to
    :func:`~inference.duration.train.train_predictor`."""
    from inference.duration.train import train_predictor

    done = finished_jobs(client, cluster)
    return train_predictor([a.job for a in done], [a.run_s for a in done], config,
                           submit_times=[a.submit_s for a in done], encoder=encoder, **kwargs)  # fmt: skip
