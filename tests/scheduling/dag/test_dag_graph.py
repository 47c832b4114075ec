"""The task graph: validation (cycles, self loops, duplicates), levels, heights, order."""

from __future__ import annotations

import numpy as np
import pytest

from scheduling.dag import GraphError, TaskGraph


def diamond() -> TaskGraph:
    return TaskGraph.from_edges(["a", "b", "c", "d"], [(0, 1, 1), (0, 2, 2), (1, 3, 3), (2, 3, 4)])


def test_levels_heights_entries_exits() -> None:
    g = diamond()
    assert g.level.tolist() == [0, 1, 1, 2]
    assert g.height.tolist() == [2, 1, 1, 0]
    assert g.entries.tolist() == [0] and g.exits.tolist() == [3]
    assert g.in_edges(3).tolist() == [2, 3] and g.out_edges(0).tolist() == [0, 1]


def test_topological_order_puts_every_edge_forward() -> None:
    # edges from higher to lower indices: order by index alone would be wrong
    g = TaskGraph.from_edges(["x", "y", "z", "w"], [(3, 1, 0), (1, 0, 0), (2, 0, 0), (3, 2, 0)])
    pos = np.empty(4, dtype=int)
    pos[g.topological_order()] = np.arange(4)
    assert np.all(pos[g.src] < pos[g.dst])


def test_cycle_is_refused_naming_its_tasks() -> None:
    with pytest.raises(GraphError, match=r"cycle through 'b', 'c', 'd'"):
        TaskGraph.from_edges(["a", "b", "c", "d", "e"], [(0, 1, 0), (1, 2, 0), (2, 3, 0), (3, 1, 0), (3, 4, 0)])


@pytest.mark.parametrize(("edges", "message"), [
    ([(0, 0, 1)], "self loop on task 'a'"),
    ([(0, 1, 1), (0, 1, 2)], "duplicate edge"),
    ([(0, 5, 1)], "outside 0..1"),
    ([(0, 1, -1)], "non-negative"),
])  # fmt: skip
def test_malformed_edges_are_refused(edges: list[tuple[int, int, float]], message: str) -> None:
    with pytest.raises(GraphError, match=message):
        TaskGraph.from_edges(["a", "b"], edges)


def test_names_must_be_unique() -> None:
    with pytest.raises(GraphError, match="not unique"):
        TaskGraph.from_edges(["a", "a"], [])
