"""The worker's duration estimate, warmed from the archive at start.

The worker's duration estimate (``Worker.durations``: ``sjf-predicted``'s per-key history, or
``sjf-learned``'s predictor with its retrieval index) learns from every job that finishes
(:func:`streams.agents.apply_lifecycle`), in memory. A restart forgot all of it: the history
started cold, and the learned predictor's index went back to the jobs it was trained on. At
start the worker now feeds it the archive's ``SEMSCHED_DURATION_WARM_UP`` (default 20,000)
latest finished jobs, oldest finish first, as it would have observed them (each job's last
finished attempt: :func:`storage.queries.finished_jobs.finished_jobs`):

- a learned predictor trained from the archive skips the jobs already in its index
  (:func:`inference.duration.archive.trained_on`); one that cannot say which is not warmed;
- the jobs the estimate now holds (observed, or in the model's index already) are remembered
  (:attr:`WarmUp.job_ids`), so that their ``finished`` reports, read again from the log after the
  restart (the committed offsets trail the archive), do not count twice;
- the read is bounded (``READ_TIMEOUT_S``): an archive too large to answer in time leaves the
  estimate as it was, and the worker starts all the same (:func:`streams.worker._warm_up_durations`).

The archive holds every cluster's jobs and the worker does not know yet which partitions it will
own, so it learns from all of them.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from scheduling.job import JobRequest
from storage.client import ArchiveClient
from storage.queries.finished_jobs import FinishedJob, finished_jobs

log = logging.getLogger("semsched.worker")

READ_TIMEOUT_S = 60.0  # the archive query's own limit (max_execution_time)


@dataclass
class WarmUp:
    observed: int = 0
    skipped: int = 0  # already in a learned predictor's index
    job_ids: set[tuple[str, str]] = field(default_factory=set)  # the jobs (cluster, job id) the estimate holds now
    seconds: float = 0.0
    note: str = ""
    rows: list[FinishedJob] = field(default_factory=list, repr=False)  # the finished jobs read (taught or not)


def warm_up_durations(estimator: Any, client: ArchiveClient, latest: int) -> WarmUp:
    """Feed ``estimator`` (``observe(job, seconds)``) the archive's ``latest`` last finished jobs
    (0: none), minus those a learned predictor trained on; what it did."""
    if latest <= 0:
        return WarmUp(note="off (SEMSCHED_DURATION_WARM_UP=0)")
    started = time.perf_counter()
    rows = finished_jobs(client, latest=latest, timeout_s=READ_TIMEOUT_S)
    out = teach(estimator, rows, "from the archive")
    out.seconds = time.perf_counter() - started
    return out


def teach(estimator: Any, rows: list[FinishedJob], source: str) -> WarmUp:
    """Feed ``estimator`` the finished jobs ``rows`` (oldest finish first), minus those a learned
    predictor trained on (none at all when it cannot say which); what it did. The archive warm-up's
    and a new duration model's (:mod:`streams.duration_reload`)."""
    started = time.perf_counter()
    config = getattr(estimator, "config", None)  # a learned predictor (inference.duration), else the history
    out = WarmUp(rows=rows)
    if config is not None:
        from inference.duration.archive import trained_on

        seen = [trained_on(config, f.submit_s, f.run_s, f.finish_s) for f in rows]
        if None in seen:
            out.note = (f"not warmed: duration model {config.version} was trained on the archive without "
                        "recording the latest finish it read (or on a --limit subset), so its index may "
                        "hold these jobs already; retrain it to warm it")  # fmt: skip
            return out
        keep = [f for f, s in zip(rows, seen, strict=True) if not s]
    else:
        keep = rows
    out.skipped = len(rows) - len(keep)
    jobs = [JobRequest.from_event(f.submission, submit_time=f.submit_s) for f in keep]
    many = getattr(estimator, "observe_many", None)  # one batch (a learned predictor encodes the texts at once)
    if many is not None and jobs:
        many(jobs, [f.run_s for f in keep])
    else:
        for job, f in zip(jobs, keep, strict=True):
            estimator.observe(job, f.run_s)
    out.job_ids = {(f.submission.cluster, f.submission.job_id) for f in rows}  # observed, or in the model's index already
    out.observed, out.seconds = len(keep), time.perf_counter() - started
    out.note = (f"{out.observed:,} finished job(s) {source} in {out.seconds:.1f} s"
                + (f" ({out.skipped:,} skipped: already in duration model {config.version})" if out.skipped else ""))  # fmt: skip
    return out
