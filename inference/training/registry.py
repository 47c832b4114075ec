"""The model registry as promotion sees it: one :class:`ModelVersion` per version, and the
:class:`Registry` it records them in.

The registry's storage is the archive's ``model_versions`` table
(``storage/queries/model_versions.py`` holds its SQL; ``ops`` adapts it to :class:`Registry`:
``ops.model_registry.ArchiveRegistry``), so ``inference`` imports no ``storage``. A status
change is recorded as a new revision of the version's row; reading gives the latest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

Status = Literal["candidate", "promoted", "rejected"]
Source = Literal["simulator", "archive"]


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

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ModelVersion:
        """From a row of the table (its column names are this class's fields)."""
        return cls(**{f.name: row[f.name] for f in fields(cls) if f.name in row})

    def columns(self) -> dict[str, Any]:
        """The row's columns (``revision`` is the registry's to assign)."""
        d = dict(self.__dict__)
        d.pop("revision")
        return d

    @property
    def step_latency(self) -> dict[str, Any] | None:
        """The candidate's measured model-step latency (``p50_ms``, ``p99_ms``, …), if recorded."""
        return (self.evaluation.get("candidate") or {}).get("latency")

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["created_at"] = self.created_at.isoformat()
        d["decided_at"] = self.decided_at.isoformat() if self.decided_at else None
        return d


class Registry(Protocol):
    """Where model versions are recorded (``ops.model_registry.ArchiveRegistry`` over the archive)."""

    def record(self, row: ModelVersion) -> ModelVersion:
        """Store ``row`` as the newest revision of its version (sets ``row.revision``); returns it."""
        ...

    def get(self, version: str) -> ModelVersion | None:
        """The latest revision of ``version``, or None when it was never recorded."""
        ...

    def list(self) -> list[ModelVersion]:
        """Every recorded version (latest revision each), oldest first."""
        ...
