"""The task graph of a DAG workflow: tasks, and edges that carry a data volume.

Edges are three parallel arrays (``src``, ``dst``, ``data``) so that everything built on
the graph (ranks, communication costs, validity checks) works on whole edge arrays at
once. The graph is checked on construction: indices in range, no self loops, no duplicate
edges, finite non-negative data, and no cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


class GraphError(ValueError):
    """The task graph is malformed (the message says how)."""


@dataclass(frozen=True)
class TaskGraph:
    """``n`` tasks named ``names``; edge ``k`` runs ``src[k] → dst[k]`` carrying ``data[k]``."""

    names: tuple[str, ...]
    src: np.ndarray
    dst: np.ndarray
    data: np.ndarray
    #: hop levels: longest number of edges from any entry task (entry tasks are level 0)
    level: np.ndarray = field(init=False, repr=False)
    #: hop heights: longest number of edges to any exit task (exit tasks are height 0)
    height: np.ndarray = field(init=False, repr=False)
    # edge indices grouped by destination / source (CSR), for O(degree) neighbour lookups
    _in: tuple[np.ndarray, np.ndarray] = field(init=False, repr=False)
    _out: tuple[np.ndarray, np.ndarray] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.names)
        src = np.asarray(self.src, dtype=np.int64).reshape(-1)
        dst = np.asarray(self.dst, dtype=np.int64).reshape(-1)
        data = np.asarray(self.data, dtype=np.float64).reshape(-1)
        if not (len(src) == len(dst) == len(data)):
            raise GraphError(f"edge arrays differ in length: src {len(src)}, dst {len(dst)}, data {len(data)}")
        if len(set(self.names)) != n:
            raise GraphError("task names are not unique")
        if len(src) and (src.min() < 0 or dst.min() < 0 or src.max() >= n or dst.max() >= n):
            raise GraphError(f"an edge names a task outside 0..{n - 1}")
        if np.any(src == dst):
            k = int(np.flatnonzero(src == dst)[0])
            raise GraphError(f"self loop on task {self.names[src[k]]!r}")
        if len(np.unique(src * max(n, 1) + dst)) != len(src):
            raise GraphError("duplicate edge")
        if not np.all(np.isfinite(data)) or np.any(data < 0):
            raise GraphError("edge data volumes must be finite and non-negative")
        for name, value in (("src", src), ("dst", dst), ("data", data)):
            value.setflags(write=False)
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_in", _csr(dst, n))
        object.__setattr__(self, "_out", _csr(src, n))
        object.__setattr__(self, "level", _hop_depth(n, src, dst, self.names))
        object.__setattr__(self, "height", _hop_depth(n, dst, src, self.names))

    @classmethod
    def from_edges(cls, names: list[str] | tuple[str, ...], edges: list[tuple[int, int, float]]) -> TaskGraph:
        """Convenience for small hand-made graphs: ``edges`` as ``(src, dst, data)`` triples."""
        arr = np.asarray(edges, dtype=np.float64).reshape(-1, 3)
        return cls(tuple(names), arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64), arr[:, 2])

    @property
    def n_tasks(self) -> int:
        return len(self.names)

    @property
    def n_edges(self) -> int:
        return len(self.src)

    @property
    def in_degree(self) -> np.ndarray:
        return np.bincount(self.dst, minlength=self.n_tasks)

    @property
    def out_degree(self) -> np.ndarray:
        return np.bincount(self.src, minlength=self.n_tasks)

    @property
    def entries(self) -> np.ndarray:
        return np.flatnonzero(self.in_degree == 0)

    @property
    def exits(self) -> np.ndarray:
        return np.flatnonzero(self.out_degree == 0)

    def in_edges(self, task: int) -> np.ndarray:
        """Indices of the edges into ``task``, ascending."""
        ptr, idx = self._in
        return idx[ptr[task]:ptr[task + 1]]

    def out_edges(self, task: int) -> np.ndarray:
        """Indices of the edges out of ``task``, ascending."""
        ptr, idx = self._out
        return idx[ptr[task]:ptr[task + 1]]

    def topological_order(self) -> np.ndarray:
        """Tasks by hop level, ties by index: every edge goes forward in this order."""
        return np.lexsort((np.arange(self.n_tasks), self.level))


def _csr(key: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(key, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(key, minlength=n))])
    order.setflags(write=False)
    return ptr, order


def _hop_depth(n: int, src: np.ndarray, dst: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    """Longest number of edges from a source of the ``src → dst`` relation to each task.

    Relaxes all edges at once, at most ``n`` rounds; a change in round ``n`` means a cycle.
    """
    depth = np.zeros(n, dtype=np.int64)
    for _ in range(n + 1):
        if len(src) == 0:
            return depth
        new = depth.copy()
        np.maximum.at(new, dst, depth[src] + 1)
        if np.array_equal(new, depth):
            return depth
        if new.max() >= n:
            break
        depth = new
    on_cycle = _cyclic_core(n, src, dst)
    shown = ", ".join(repr(names[i]) for i in on_cycle[:5])
    raise GraphError(f"the graph has a cycle through {shown}{' …' if len(on_cycle) > 5 else ''}")


def _cyclic_core(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Tasks left after repeatedly removing tasks without live predecessors or successors."""
    alive = np.ones(n, dtype=bool)
    while True:
        live = alive[src] & alive[dst]
        has_in = np.bincount(dst[live], minlength=n) > 0
        has_out = np.bincount(src[live], minlength=n) > 0
        keep = alive & has_in & has_out
        if np.array_equal(keep, alive):
            return np.flatnonzero(alive)
        alive = keep
