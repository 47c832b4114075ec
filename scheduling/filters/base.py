"""The filter contract: a hard constraint evaluated over all nodes at once.

A filter has a ``name``, a vectorised ``mask(job, snapshot)`` (True = the node passes)
and a human-readable ``reason(job)`` for the nodes it rejects. An optional ``explain`` splits
its rejections into finer reasons (e.g. insufficient cpu vs memory); without one they
are all reported under ``reason``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from scheduling.job import JobRequest
from scheduling.snapshot import ClusterSnapshot


@runtime_checkable
class Filter(Protocol):
    name: str

    def mask(self, job: JobRequest, snapshot: ClusterSnapshot) -> np.ndarray: ...

    def reason(self, job: JobRequest) -> str: ...


def explain(f: Filter, job: JobRequest, snapshot: ClusterSnapshot, rejected: np.ndarray) -> list[tuple[str, int]]:
    """``f.explain(...)`` when the filter has one, else all of ``rejected`` under ``f.reason(job)``."""
    method = getattr(f, "explain", None)
    if method is not None:
        return method(job, snapshot, rejected)
    return [(f.reason(job), int(np.count_nonzero(rejected)))]


class BaseFilter:
    """Convenience base: subclasses set ``name`` and implement ``mask`` and ``reason``."""

    name: str = "filter"

    def mask(self, job: JobRequest, snapshot: ClusterSnapshot) -> np.ndarray:
        raise NotImplementedError

    def reason(self, job: JobRequest) -> str:
        raise NotImplementedError

    def explain(self, job: JobRequest, snapshot: ClusterSnapshot, rejected: np.ndarray) -> list[tuple[str, int]]:
        """``(reason, node count)`` pairs for the ``rejected`` nodes (a bool mask)."""
        return [(self.reason(job), int(np.count_nonzero(rejected)))]
