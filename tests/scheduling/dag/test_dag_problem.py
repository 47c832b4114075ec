"""Platform communication costs and the problem's mean costs (HEFT's w̄ and c̄)."""

from __future__ import annotations

import numpy as np
import pytest

from scheduling.dag import DagProblem, GraphError, Platform, PlatformError, TaskGraph


def test_comm_cost_is_latency_plus_data_over_bandwidth_and_zero_on_one_processor() -> None:
    bw = np.array([[0, 2.0, 4.0], [2.0, 0, np.inf], [4.0, np.inf, 0]])
    lat = np.array([[0, 1.0, 1.0], [1.0, 0, 0.5], [1.0, 0.5, 0]])
    plat = Platform(("a", "b", "c"), bw, lat)
    assert plat.comm_cost(8.0, 0, 1) == pytest.approx(1 + 8 / 2)
    assert plat.comm_cost(8.0, 0, 2) == pytest.approx(1 + 8 / 4)
    assert plat.comm_cost(8.0, 1, 2) == pytest.approx(0.5)  # infinite bandwidth: only the latency
    assert plat.comm_cost(np.array([8.0, 8.0]), np.array([1, 2]), np.array([1, 2])).tolist() == [0.0, 0.0]
    inv, mean_lat = plat.mean_comm_factors()
    assert inv == pytest.approx((2 * 0.5 + 2 * 0.25) / 6)
    assert mean_lat == pytest.approx((2 * 1 + 2 * 1 + 2 * 0.5) / 6)


def test_mean_costs_follow_topcuoglu(topcuoglu: DagProblem) -> None:
    assert topcuoglu.mean_costs()[0] == pytest.approx(13.0)  # (14 + 16 + 9) / 3
    assert topcuoglu.mean_comm_costs().tolist() == topcuoglu.graph.data.tolist()  # unit bandwidth
    single = DagProblem(topcuoglu.graph, Platform.uniform(1), topcuoglu.costs[:, :1])
    assert single.mean_comm_costs().tolist() == [0.0] * topcuoglu.graph.n_edges


def test_shapes_and_values_are_checked() -> None:
    g = TaskGraph.from_edges(["a", "b"], [(0, 1, 1.0)])
    with pytest.raises(GraphError, match=r"\(tasks, processors\) = \(2, 2\)"):
        DagProblem(g, Platform.uniform(2), np.ones((2, 3)))
    with pytest.raises(GraphError, match="finite and >= 0"):
        DagProblem(g, Platform.uniform(2), np.array([[1.0, -1.0], [1.0, 1.0]]))
    with pytest.raises(PlatformError, match="> 0"):
        Platform(("a", "b"), np.array([[0, 0.0], [1.0, 0]]), np.zeros((2, 2)))
    with pytest.raises(PlatformError, match="at least one"):
        Platform((), np.zeros((0, 0)), np.zeros((0, 0)))
