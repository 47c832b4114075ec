"""Helpers every query module shares: row dicts, epoch-ms times, NaN-safe floats, the
"running" job set, and ``run_sql``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from scheduling.events import FALLBACK_SUFFIX
from storage.client import ArchiveClient


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


def run_sql(client: ArchiveClient, sql: str, *, timeout_s: float | None = None,
            max_rows: int | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:  # fmt: skip
    """An analyst's query (``semsched sql``, ``POST /sql``): column names and rows. Read-only:
    anything else raises ``ValueError`` with the reason (:mod:`storage.queries.read_only`).
    ``timeout_s`` / ``max_rows``: the query stops with ClickHouse's error past them (a worker answering
    ``/sql`` sets both: :data:`WORKER_SQL_LIMITS`)."""
    from storage.queries.read_only import check_read_only

    settings: dict[str, Any] = {}
    if timeout_s is not None:
        settings["max_execution_time"] = timeout_s
    if max_rows is not None:
        settings |= {"max_result_rows": max_rows, "result_overflow_mode": "throw"}
    checked = check_read_only(sql)
    return client.query_rows(checked, settings=settings) if settings else client.query_rows(checked)


#: what a worker's ``POST /sql`` allows one query: it shares the worker's process and its archive's session
#: with the archiver (found by review: ``SELECT count() FROM system.numbers`` ran for ever and no event was
#: archived meanwhile; 2 million rows took 14 s of JSON on the worker's event loop)
WORKER_SQL_LIMITS: dict[str, Any] = {"timeout_s": 60.0, "max_rows": 100_000}


def running_jobs(lifecycle: str = "jobs_lifecycle_applied") -> str:
    """Jobs with an attempt that started and has not ended, and no final state: by the events
    themselves, not their order (a start and an end can share a millisecond); ``lifecycle``: the view
    read (reconciliation checks the accepted reports, every other read the applied ones). Rows of
    ``(cluster, job_id)``: a job id is unique only within a cluster (``(cluster, job_id) IN (...)``)."""
    return f"""
SELECT cluster, job_id FROM {lifecycle} GROUP BY cluster, job_id, attempt
HAVING countIf(state = 'started') > 0
   AND countIf(state IN ('finished', 'failed', 'preempted', 'rejected')) = 0
   AND (cluster, job_id) NOT IN (SELECT cluster, job_id FROM {lifecycle} WHERE state IN ('finished', 'rejected'))
"""


_RUNNING = running_jobs()

#: the policy a decision is counted under: a model-backed policy's placements that its fallback
#: heuristic scored (Triton down, a deadline missed) are a group of their own, "learned (fallback)"
DECIDED_BY = f"if(fallback, concat(policy, '{FALLBACK_SUFFIX}'), policy)"  # (scheduling.events.decided_by)
