"""The one error a workflow loader raises for a bad file: it names the file and why."""

from __future__ import annotations

from pathlib import Path


class WorkflowFormatError(ValueError):
    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return (type(self), (self.path, self.reason))
