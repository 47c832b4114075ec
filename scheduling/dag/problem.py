"""A DAG scheduling problem: a task graph, a platform and the computation-cost matrix.

``costs[i, p]`` is the execution time of task ``i`` on processor ``p`` (Topcuoglu's ``W``);
heterogeneous processors are simply different columns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduling.dag.graph import GraphError, TaskGraph
from scheduling.dag.platform import Platform


@dataclass(frozen=True)
class DagProblem:
    graph: TaskGraph
    platform: Platform
    costs: np.ndarray  # (n_tasks, n_procs), finite, >= 0
    name: str = ""

    def __post_init__(self) -> None:
        w = np.array(self.costs, dtype=np.float64)
        shape = (self.graph.n_tasks, self.platform.n_procs)
        if w.shape != shape:
            raise GraphError(f"cost matrix is {w.shape}, expected (tasks, processors) = {shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise GraphError("computation costs must be finite and >= 0")
        w.setflags(write=False)
        object.__setattr__(self, "costs", w)

    @property
    def n_tasks(self) -> int:
        return self.graph.n_tasks

    @property
    def n_procs(self) -> int:
        return self.platform.n_procs

    def mean_costs(self) -> np.ndarray:
        """Per task, the mean computation cost over the processors (``w̄_i``)."""
        return self.costs.mean(axis=1)

    def mean_comm_costs(self) -> np.ndarray:
        """Per edge, the mean communication cost over pairs of different processors (``c̄_ij``)."""
        inv_bw, lat = self.platform.mean_comm_factors()
        if self.n_procs == 1:
            return np.zeros(self.graph.n_edges)
        return lat + self.graph.data * inv_bw

    def comm_to_comp_ratio(self) -> float:
        """CCR: mean edge communication cost over mean task computation cost."""
        mean_w = float(self.costs.mean()) if self.costs.size else 0.0
        if self.graph.n_edges == 0 or mean_w == 0:
            return 0.0
        return float(self.mean_comm_costs().mean()) / mean_w
