"""The ``model_versions`` table (``storage/migrations/0011_model_versions.sql``): every model
version, where it came from, its evaluation on the held-out replay and the promotion decision.

A status change is a new row with a higher ``revision`` (``ReplacingMergeTree(revision)``
keyed by ``version``), so reading with ``FINAL`` gives one row per version: its latest
state. ``config``, ``train_metrics`` and ``evaluation`` are JSON text.

The client is anything with ``query_rows`` / ``insert_arrow`` (``storage.client`` 's
:class:`ArchiveClient`; reads also work through the worker's read-only ``/sql``), so
``inference`` needs no import of ``storage``. Times are read as epoch milliseconds, which
both paths return as plain numbers.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

import pyarrow as pa

TABLE = "model_versions"
Status = Literal["candidate", "promoted", "rejected"]
Source = Literal["simulator", "archive"]

_TS = pa.timestamp("ms", tz="UTC")
_SCHEMA = pa.schema([
    ("version", pa.string()), ("created_at", _TS), ("parent_version", pa.string()), ("source", pa.string()),
    ("expert", pa.string()), ("path", pa.string()), ("config", pa.string()), ("train_metrics", pa.string()),
    ("evaluation", pa.string()), ("primary_metric", pa.string()), ("candidate_score", pa.float64()),
    ("serving_score", pa.float64()), ("status", pa.string()), ("reason", pa.string()), ("decided_at", _TS),
    ("revision", pa.uint64()),
])  # fmt: skip


class RegistryClient(Protocol):
    """What the registry needs of an archive client."""

    def query_rows(self, sql: str, parameters: Any = None) -> tuple[list[str], list[tuple[Any, ...]]]: ...

    def insert_arrow(self, table: str, data: pa.Table) -> int: ...


@dataclass
class ModelVersion:
    """One row of ``model_versions`` (its latest revision when read back)."""

    version: str
    source: Source
    status: Status
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    parent_version: str = ""  # the serving version it was compared against ('' = none)
    expert: str = ""
    path: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    train_metrics: dict[str, Any] = field(default_factory=dict)
    evaluation: dict[str, Any] = field(default_factory=dict)
    primary_metric: str = ""
    candidate_score: float | None = None
    serving_score: float | None = None
    reason: str = ""
    decided_at: datetime | None = None
    revision: int = 0

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["created_at"] = self.created_at.isoformat()
        d["decided_at"] = self.decided_at.isoformat() if self.decided_at else None
        return d


_last_revision = 0
_revision_lock = threading.Lock()


def next_revision() -> int:
    """Nanoseconds since the epoch, strictly increasing within this process (the replacing
    version of a row: a later status update always wins)."""
    global _last_revision
    with _revision_lock:
        _last_revision = max(time.time_ns(), _last_revision + 1)
        return _last_revision


def record(client: RegistryClient, row: ModelVersion) -> ModelVersion:
    """Insert ``row`` as the newest revision of its version (sets ``row.revision``)."""
    row.revision = next_revision()
    data = {
        "version": [row.version], "created_at": [row.created_at], "parent_version": [row.parent_version],
        "source": [row.source], "expert": [row.expert], "path": [row.path],
        "config": [json.dumps(row.config, default=str)], "train_metrics": [json.dumps(row.train_metrics, default=str)],
        "evaluation": [json.dumps(row.evaluation, default=str)], "primary_metric": [row.primary_metric],
        "candidate_score": [row.candidate_score], "serving_score": [row.serving_score], "status": [row.status],
        "reason": [row.reason], "decided_at": [row.decided_at], "revision": [row.revision],
    }  # fmt: skip
    client.insert_arrow(TABLE, pa.Table.from_arrays([pa.array(data[f.name], f.type) for f in _SCHEMA],
                                                    schema=_SCHEMA))  # fmt: skip
    return row


_SELECT = f"""SELECT version, toUnixTimestamp64Milli(created_at) AS created_ms, parent_version, source, expert, path,
    config, train_metrics, evaluation, primary_metric, candidate_score, serving_score, status, reason,
    toUnixTimestamp64Milli(decided_at) AS decided_ms, revision
FROM {TABLE} FINAL"""


def _ms(v: Any) -> datetime | None:
    return None if v is None else datetime.fromtimestamp(int(v) / 1000, UTC)


def _json(v: Any) -> dict[str, Any]:
    if isinstance(v, bytes):
        v = v.decode()
    return json.loads(v) if v else {}


def _float(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return None if f != f else f


def _row(r: tuple[Any, ...]) -> ModelVersion:
    (version, created, parent, source, expert, path, config, train, evaluation, metric, cand, serv, status, reason,
     decided, revision) = r  # fmt: skip
    return ModelVersion(version=version, created_at=_ms(created) or datetime.now(UTC), parent_version=parent,
                        source=source, expert=expert, path=path, config=_json(config), train_metrics=_json(train),
                        evaluation=_json(evaluation), primary_metric=metric, candidate_score=_float(cand),
                        serving_score=_float(serv), status=status, reason=reason, decided_at=_ms(decided),
                        revision=int(revision))  # fmt: skip


def get_version(client: RegistryClient, version: str) -> ModelVersion | None:
    """The latest revision of ``version``, or None when it was never recorded."""
    _, rows = client.query_rows(_SELECT + " WHERE version = %(v)s", {"v": version})
    return _row(rows[0]) if rows else None


def list_versions(client: RegistryClient) -> list[ModelVersion]:
    """Every recorded version (latest revision each), oldest first."""
    _, rows = client.query_rows(_SELECT + " ORDER BY created_at, version")
    return [_row(r) for r in rows]
