"""The model registry over the archive: :class:`inference.training.registry.Registry` on the
``model_versions`` table (:mod:`storage.queries.model_versions`).

``ops`` is where ``storage`` meets ``inference``: promotion records and reads
:class:`~inference.training.registry.ModelVersion` objects, storage reads and writes rows of
the table; this adapter converts between the two (same field names).
"""

from __future__ import annotations

from typing import Any

from inference.training.registry import ModelVersion
from storage.queries.model_versions import insert_model_version, model_version, model_versions


class ArchiveRegistry:
    """Model versions recorded in the archive behind ``client`` (writes need a writable client)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def record(self, row: ModelVersion) -> ModelVersion:
        row.revision = insert_model_version(self.client, row.columns())
        return row

    def get(self, version: str) -> ModelVersion | None:
        row = model_version(self.client, version)
        return None if row is None else ModelVersion.from_row(row)

    def list(self) -> list[ModelVersion]:
        return [ModelVersion.from_row(r) for r in model_versions(self.client)]
