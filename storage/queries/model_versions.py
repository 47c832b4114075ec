"""The ``model_versions`` table (``storage/migrations/0011_model_versions.sql``): every model
version of the learned scorer, where it came from, its evaluation on the held-out replay and
the promotion decision.

A status change is a new row with a higher ``revision`` (``ReplacingMergeTree(revision)``
keyed by ``version``), so reading with ``FINAL`` gives one row per version: its latest state.
``config``, ``train_metrics`` and ``evaluation`` are JSON text in the table and dicts here.

Rows are plain mappings (:class:`ModelVersionRow`: the table's columns); the promotion logic
(``inference.training.promotion``) works on its own dataclass with the same field names and
``ops`` wires the two together. Reads also work through the worker's read-only ``/sql``
(times are selected as epoch milliseconds, plain numbers on every client path).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypedDict

import pyarrow as pa

from storage.client import ArchiveClient
from storage.queries._common import _dt, _f

TABLE = "model_versions"

_TS = pa.timestamp("ms", tz="UTC")
_SCHEMA = pa.schema([
    ("version", pa.string()), ("created_at", _TS), ("parent_version", pa.string()), ("source", pa.string()),
    ("expert", pa.string()), ("path", pa.string()), ("config", pa.string()), ("train_metrics", pa.string()),
    ("evaluation", pa.string()), ("primary_metric", pa.string()), ("candidate_score", pa.float64()),
    ("serving_score", pa.float64()), ("status", pa.string()), ("reason", pa.string()), ("decided_at", _TS),
    ("revision", pa.uint64()),
])  # fmt: skip
_JSON = ("config", "train_metrics", "evaluation")


class ModelVersionRow(TypedDict):
    """One row of ``model_versions`` (JSON columns as dicts, times as aware datetimes)."""

    version: str
    created_at: datetime
    parent_version: str
    source: str  # simulator | archive
    expert: str
    path: str
    config: dict[str, Any]
    train_metrics: dict[str, Any]
    evaluation: dict[str, Any]
    primary_metric: str
    candidate_score: float | None
    serving_score: float | None
    status: str  # candidate | promoted | rejected
    reason: str
    decided_at: datetime | None
    revision: int


_last_revision = 0
_revision_lock = threading.Lock()


def next_revision() -> int:
    """Nanoseconds since the epoch, strictly increasing within this process (the replacing
    version of a row: a later status update always wins)."""
    global _last_revision
    with _revision_lock:
        _last_revision = max(time.time_ns(), _last_revision + 1)
        return _last_revision


def insert_model_version(client: ArchiveClient, row: Mapping[str, Any]) -> int:
    """Insert ``row`` (every column but ``revision``) as the newest revision of its version;
    returns that revision."""
    revision = next_revision()
    values = {**row, "revision": revision}
    for k in _JSON:
        values[k] = json.dumps(values.get(k) or {}, default=str)
    client.insert_arrow(TABLE, pa.Table.from_arrays([pa.array([values[f.name]], f.type) for f in _SCHEMA],
                                                    schema=_SCHEMA))  # fmt: skip
    return revision


_SELECT = f"""SELECT version, toUnixTimestamp64Milli(created_at) AS created_ms, parent_version, source, expert, path,
    config, train_metrics, evaluation, primary_metric, candidate_score, serving_score, status, reason,
    toUnixTimestamp64Milli(decided_at) AS decided_ms, revision
FROM {TABLE} FINAL"""


def _json(v: Any) -> dict[str, Any]:
    if isinstance(v, bytes):
        v = v.decode()
    return json.loads(v) if v else {}


def _row(cols: list[str], r: tuple[Any, ...]) -> ModelVersionRow:
    d = dict(zip(cols, r, strict=True))
    for k in _JSON:
        d[k] = _json(d[k])
    d["created_at"], d["decided_at"] = _dt(d.pop("created_ms")), _dt(d.pop("decided_ms"))
    d["candidate_score"], d["serving_score"] = _f(d["candidate_score"]), _f(d["serving_score"])
    d["revision"] = int(d["revision"])
    return ModelVersionRow(**d)  # type: ignore[typeddict-item]


def model_version(client: ArchiveClient, version: str) -> ModelVersionRow | None:
    """The latest revision of ``version``, or None when it was never recorded."""
    cols, rows = client.query_rows(_SELECT + " WHERE version = %(v)s", {"v": version})
    return _row(cols, rows[0]) if rows else None


def model_versions(client: ArchiveClient) -> list[ModelVersionRow]:
    """Every recorded version (latest revision each), oldest first."""
    cols, rows = client.query_rows(_SELECT + " ORDER BY created_at, version")
    return [_row(cols, r) for r in rows]
