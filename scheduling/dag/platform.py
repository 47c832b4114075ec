"""The processors a DAG runs on and what moving data between them costs.

Communication cost of an edge carrying ``data`` from a task on processor ``p`` to a task on
processor ``q`` (Topcuoglu et al. 2002, eq. 2)::

    c(p, q) = latency[p, q] + data / bandwidth[p, q]   if p != q
    c(p, p) = 0

A bandwidth of ``inf`` means free transfer between two processors (e.g. two cores of one
machine sharing memory and the local disk); the diagonal of both matrices is ignored.
The latency is paid by every edge between different processors, also one without data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


class PlatformError(ValueError):
    """The platform description is malformed."""


@dataclass(frozen=True)
class Platform:
    names: tuple[str, ...]
    bandwidth: np.ndarray  # (P, P) data units per time unit, > 0, may be inf
    latency: np.ndarray  # (P, P) time units, >= 0
    #: 1 / bandwidth with a zero diagonal (what the cost formulas multiply by)
    inv_bandwidth: np.ndarray = field(init=False, repr=False)
    #: latency with a zero diagonal
    startup: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        p = len(self.names)
        if p == 0:
            raise PlatformError("a platform needs at least one processor")
        if len(set(self.names)) != p:
            raise PlatformError("processor names are not unique")
        bw = np.array(self.bandwidth, dtype=np.float64)
        lat = np.array(self.latency, dtype=np.float64)
        if bw.shape != (p, p) or lat.shape != (p, p):
            raise PlatformError(f"bandwidth {bw.shape} and latency {lat.shape} must both be ({p}, {p})")
        off = ~np.eye(p, dtype=bool)
        if np.any(np.isnan(bw[off])) or np.any(bw[off] <= 0):
            raise PlatformError("bandwidth between different processors must be > 0 (inf = free)")
        if not np.all(np.isfinite(lat[off])) or np.any(lat[off] < 0):
            raise PlatformError("latency must be finite and >= 0")
        inv = np.zeros((p, p))
        inv[off] = 1.0 / bw[off]
        lat[~off] = 0.0
        for name, value in (("bandwidth", bw), ("latency", lat), ("inv_bandwidth", inv), ("startup", lat)):
            value.setflags(write=False)
            object.__setattr__(self, name, value)

    @classmethod
    def uniform(cls, n: int, *, bandwidth: float = 1.0, latency: float = 0.0,
                names: Sequence[str] | None = None) -> Platform:  # fmt: skip
        """``n`` processors, every pair linked with the same bandwidth and latency."""
        return cls(tuple(names) if names else tuple(f"P{i}" for i in range(n)),
                   np.full((n, n), float(bandwidth)), np.full((n, n), float(latency)))  # fmt: skip

    @property
    def n_procs(self) -> int:
        return len(self.names)

    def comm_cost(self, data: np.ndarray | float, src_proc: np.ndarray | int,
                  dst_proc: np.ndarray | int) -> np.ndarray:  # fmt: skip
        """Cost of moving ``data`` from ``src_proc`` to ``dst_proc`` (broadcasting numpy arrays)."""
        return self.startup[src_proc, dst_proc] + np.asarray(data) * self.inv_bandwidth[src_proc, dst_proc]

    def mean_comm_factors(self) -> tuple[float, float]:
        """(mean of 1/bandwidth, mean latency) over ordered pairs of *different* processors.

        The mean communication cost of an edge, used by HEFT and CPOP's ranks, is
        ``mean latency + data × mean(1/bandwidth)``. With uniform links this is Topcuoglu's
        ``L̄ + data / B̄``. One processor: (0, 0), nothing is ever communicated.
        """
        p = self.n_procs
        if p == 1:
            return 0.0, 0.0
        pairs = p * (p - 1)
        return float(self.inv_bandwidth.sum() / pairs), float(self.startup.sum() / pairs)
