"""Builders for the DAG tests (``from dag_builders import …``; pytest puts this folder on
``sys.path``): the Topcuoglu et al. (2002) example graph, written out by hand from the
paper (Fig. 2 and Table 1) so the scheduling tests need no loader, and small chains."""

from __future__ import annotations

import numpy as np

from scheduling.dag import DagProblem, Platform, TaskGraph

TOPCUOGLU_W = [[14, 16, 9], [13, 19, 18], [11, 13, 19], [13, 8, 17], [12, 13, 10],
               [13, 16, 9], [7, 15, 11], [5, 11, 14], [18, 12, 20], [21, 7, 16]]  # fmt: skip
TOPCUOGLU_EDGES = [(0, 1, 18), (0, 2, 12), (0, 3, 9), (0, 4, 11), (0, 5, 14), (1, 7, 19), (1, 8, 16),
                   (2, 6, 23), (3, 7, 27), (3, 8, 23), (4, 8, 13), (5, 7, 15), (6, 9, 17), (7, 9, 11),
                   (8, 9, 13)]  # fmt: skip


def topcuoglu_problem() -> DagProblem:
    graph = TaskGraph.from_edges([f"n{i + 1}" for i in range(10)], TOPCUOGLU_EDGES)
    return DagProblem(graph, Platform.uniform(3), np.array(TOPCUOGLU_W, dtype=float), name="topcuoglu")


def chain_problem(costs: list[list[float]], data: list[float], *, bandwidth: float = 1.0) -> DagProblem:
    """A chain t0 → t1 → … with the given cost rows and edge data."""
    names = [f"t{i}" for i in range(len(costs))]
    graph = TaskGraph.from_edges(names, [(i, i + 1, d) for i, d in enumerate(data)])
    return DagProblem(graph, Platform.uniform(len(costs[0]), bandwidth=bandwidth), np.array(costs, dtype=float))


def diamond_problem() -> DagProblem:
    """a → b (4), a → c (2), b → d (1), c → d (6); two processors, bandwidth 2.

    Mean costs w̄ = (3, 2, 4, 1), mean communication c̄ = (2, 1, 0.5, 3); by hand:
    rank_u = (12, 3.5, 8, 1), rank_d = (0, 5, 4, 11), priority = (12, 8.5, 12, 12),
    critical path a, c, d on P0 (7 against 9). HEFT: a P0 [0, 2], c P0 [2, 6],
    b P0 [6, 7] (P1 ties at 7), d P0 [7, 8]: makespan 8. CP_MIN = a, c, d with min costs
    2 + 4 + 1 = 7; sequential time min(8, 12) = 8.
    """
    graph = TaskGraph.from_edges(["a", "b", "c", "d"], [(0, 1, 4), (0, 2, 2), (1, 3, 1), (2, 3, 6)])
    costs = np.array([[2, 4], [1, 3], [4, 4], [1, 1]], dtype=float)
    return DagProblem(graph, Platform.uniform(2, bandwidth=2.0), costs, name="diamond")
