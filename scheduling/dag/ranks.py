"""Longest-path quantities over a task graph: HEFT's upward rank, CPOP's downward rank and
critical paths.

With node weights ``w`` and edge weights ``c``::

    rank_u(i) = w_i + max_{j ∈ succ(i)} (c_ij + rank_u(j))      (0 for the max over no successor)
    rank_d(i) = max_{j ∈ pred(i)} (rank_d(j) + w_j + c_ji)      (0 for an entry task)

Topcuoglu et al. use the mean computation cost ``w̄_i`` and the mean communication cost
``c̄_ij``. Both are computed a hop level at a time, vectorised over the level's tasks.
"""

from __future__ import annotations

import numpy as np

from scheduling.dag.graph import TaskGraph
from scheduling.dag.problem import DagProblem

#: values within this relative distance count as equal (ties break by lower task index)
TIE_TOL = 1e-9


def upward_ranks(graph: TaskGraph, node_w: np.ndarray, edge_w: np.ndarray) -> np.ndarray:
    rank = np.zeros(graph.n_tasks)
    for h in range(int(graph.height.max(initial=-1)) + 1):
        tasks = graph.height == h
        tail = np.zeros(graph.n_tasks)
        edges = tasks[graph.src]
        np.maximum.at(tail, graph.src[edges], edge_w[edges] + rank[graph.dst[edges]])
        rank[tasks] = node_w[tasks] + tail[tasks]
    return rank


def downward_ranks(graph: TaskGraph, node_w: np.ndarray, edge_w: np.ndarray) -> np.ndarray:
    rank = np.zeros(graph.n_tasks)
    for lv in range(1, int(graph.level.max(initial=-1)) + 1):
        edges = graph.level[graph.dst] == lv
        head = np.zeros(graph.n_tasks)
        np.maximum.at(head, graph.dst[edges], rank[graph.src[edges]] + node_w[graph.src[edges]] + edge_w[edges])
        tasks = graph.level == lv
        rank[tasks] = head[tasks]
    return rank


def heft_upward_ranks(problem: DagProblem) -> np.ndarray:
    """``rank_u`` with mean computation and mean communication costs (HEFT's priority)."""
    return upward_ranks(problem.graph, problem.mean_costs(), problem.mean_comm_costs())


def cpop_priorities(problem: DagProblem) -> np.ndarray:
    """``rank_u + rank_d`` with mean costs (CPOP's priority)."""
    w, c = problem.mean_costs(), problem.mean_comm_costs()
    return upward_ranks(problem.graph, w, c) + downward_ranks(problem.graph, w, c)


def best_index(values: np.ndarray, candidates: np.ndarray, *, largest: bool = True) -> int:
    """The candidate with the largest (or smallest) value; near-ties go to the lowest index."""
    v = values[candidates]
    target = v.max() if largest else v.min()
    scale = max(1.0, abs(float(target)))
    close = candidates[np.abs(v - target) <= TIE_TOL * scale]
    return int(close.min())


def critical_path(graph: TaskGraph, node_w: np.ndarray, edge_w: np.ndarray) -> list[int]:
    """One longest entry-to-exit path (by node plus edge weights), as task indices.

    Starts at the entry task with the largest upward rank and follows, at each step, the
    successor ``j`` maximising ``c_ij + rank_u(j)``; near-ties go to the lowest index.
    """
    if graph.n_tasks == 0:
        return []
    rank = upward_ranks(graph, node_w, edge_w)
    path = [best_index(rank, graph.entries)]
    while True:
        out = graph.out_edges(path[-1])
        if len(out) == 0:
            return path
        via = np.zeros(graph.n_tasks)
        via[graph.dst[out]] = edge_w[out] + rank[graph.dst[out]]
        path.append(best_index(via, graph.dst[out]))
